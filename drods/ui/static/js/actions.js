// The operator's actions, with a confirmation first. They call the same endpoints as
// `drods cluster cordon|uncordon|drain` and a reschedule request.

import { sameLabel } from "./dom.js";
import { BINDINGS } from "./live.js";

const RESCHEDULE_REASON = "multicluster.io/reschedule-reason";

export function confirmAction(title, text, okLabel) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const ok = document.getElementById("confirm-ok");
  ok.textContent = okLabel;
  dialog.returnValue = "";
  // A live update while the dialog is open may rebuild the button that opened it; the dialog then
  // has nothing to give focus back to, so the rebuilt button with the same label gets it.
  const opener = document.activeElement;
  const around = opener && opener !== document.body ? opener.parentElement : null;
  const label = opener ? opener.textContent : null;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (around && !opener.isConnected) {
        const again = sameLabel(around, opener.tagName, label);
        if (again) again.focus();
      }
      resolve(dialog.returnValue === "ok");
    }, { once: true });
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

// The server's drain (`drods cluster drain` calls it too): cordon, then every binding with replicas
// there is re-placed (new copies ready first), a StatefulSet with a migration hook by a MigrationPlan.
export async function drain(session, cluster) {
  return session.post(`/api/v1/clusters/${encodeURIComponent(cluster)}/drain`, {});
}

// The drain's dry run, said in one sentence for its confirmation: how many workloads would move, where
// their replicas would run then, and how many would wait for room (the server's forecast).
export async function drainForecast(session, cluster) {
  const plan = await session.post(`/api/v1/clusters/${encodeURIComponent(cluster)}/drain?dryRun=All`, {});
  const f = plan.forecast || {};
  const where = new Map();
  for (const b of f.bindings || []) {
    for (const p of b.placement || []) where.set(p.cluster, (where.get(p.cluster) || 0) + p.replicas);
  }
  const moved = (plan.rescheduled || []).length;
  const plans = (plan.migrationPlans || []).length;
  const kept = (plan.refused || []).length;
  return `${moved} workload(s) would be re-placed`
    + (where.size ? ` (then running on ${[...where].map(([c, k]) => `${c} ×${k}`).join(", ")})` : "")
    + (plans ? `, ${plans} moved with their data by a migration plan` : "")
    + (kept ? `, ${kept} left in place (their data would not move)` : "")
    + (f.pendingReplicas ? `; ${f.pendingReplicas} replica(s) would wait for room elsewhere.` : "; every replica would find room.");
}
