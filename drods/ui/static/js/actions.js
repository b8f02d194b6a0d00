// The operator's actions, with a confirmation first. They call the same endpoints as
// `drods cluster cordon|uncordon|drain` and a reschedule request.

import { BINDINGS, placementOf } from "./live.js";

const RESCHEDULE_REASON = "multicluster.io/reschedule-reason";

export function confirmAction(title, text, okLabel) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const ok = document.getElementById("confirm-ok");
  ok.textContent = okLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

function nowMs() {
  return new Date().toISOString(); // RFC 3339 with milliseconds, UTC
}

export async function setUnschedulable(session, cluster, value) {
  return session.mergePatch(`/api/v1/clusters/${encodeURIComponent(cluster)}`, { unschedulable: value });
}

export async function reschedule(session, binding, reason) {
  return session.mergePatch(`${BINDINGS}/${encodeURIComponent(binding)}`, {
    metadata: { annotations: { [RESCHEDULE_REASON]: reason } },
    spec: { rescheduleTriggeredAt: nowMs() },
  });
}

// Cordon, then ask the scheduler to re-place every binding with replicas there; propagation
// moves them gracefully (new copies ready first). Returns the bindings asked to move.
export async function drain(session, cluster) {
  await setUnschedulable(session, cluster, true);
  const list = await session.get(BINDINGS);
  const placed = list.items.filter((b) => placementOf(b).some((p) => p.cluster === cluster));
  for (const b of placed) await reschedule(session, b.metadata.name, `drain ${cluster}`);
  return placed.map((b) => b.metadata.name);
}
