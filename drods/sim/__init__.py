"""``drods sim``: a simulated member cluster (KWOK-like) for development, tests, demos and benchmarks.

It speaks the Kubernetes API (kubectl and the official clients work against it) and is built on the
control plane's own API machinery with the Kind table of a plain cluster (`drods.sim.kinds`).

Nodes (`drods.sim.nodes`) carry capacity/allocatable (cpu, memory, pods, ``nvidia.com/gpu``), a
Ready condition and these labels (names in `drods.members.labels`):

* ``topology.kubernetes.io/region`` / ``topology.kubernetes.io/zone`` (``--region`` / ``--zone``)
* ``node.kubernetes.io/instance-type`` (derived from the shape, e.g. ``sim-8c32g-4xa100``)
* ``multicluster.io/provider`` (``--provider``; also the scheme of ``spec.providerID``)
* ``multicluster.io/city`` (``--city``, M1 city codes such as ``DFW``)
* ``nvidia.com/gpu.product`` / ``nvidia.com/gpu.count`` (``--gpus`` / ``--gpu-model``)

Behaviour (`drods.sim.controller`): Deployments, StatefulSets, DaemonSets, Jobs and ReplicaSets make
pods (owner references; a Deployment makes no ReplicaSet); a first-fit placer binds pods by requests
or leaves them Pending with ``PodScheduled=False``; pods are Ready after ``--startup-seconds``; Job pods succeed after
``--job-seconds``; workload status counts replicas; deleting an owner or a namespace deletes what it
owns; objects need an existing namespace. The other built-in kinds `drods.sim.kinds` lists
(HorizontalPodAutoscaler, PodDisruptionBudget, NetworkPolicy, PriorityClass, StorageClass, …) are
stored as given: no controller acts on them.

Usage (`drods.sim.usage`): each running pod uses a fraction of its requests (``--cpu-utilisation``,
``--memory-utilisation``, optional sinusoid ``--usage-amplitude``/``--usage-period``), per pod
overridable with the annotations ``sim.drods.io/cpu-utilisation``, ``sim.drods.io/memory-utilisation``,
``sim.drods.io/usage-amplitude``, ``sim.drods.io/usage-period-seconds`` (``sim.drods.io/run-seconds``
for run-to-completion pods). ``--preload F`` puts one pod per node in namespace ``other-tenant``
requesting and using F of the node. Usage is served as ``metrics.k8s.io/v1beta1`` (``kubectl top``)
and on ``/metrics`` for Prometheus (`drods.sim.prom`).

Access: HTTPS with the sim's own CA; ``--kubeconfig-out`` (default ``DATA_DIR/kubeconfig``) holds the
server URL, the CA and an admin bearer token minted with the sim's key. ``kubectl get`` prints the
columns a real cluster prints (pods ``READY STATUS RESTARTS``, nodes ``STATUS ROLES VERSION``, …; the
kinds in `drods.sim.kinds` carry `drods.api.table.KUBERNETES_COLUMNS`). The process loads only the
Kubernetes half of the API server (`drods.api.app` imports route modules by name), not the
control plane's façade, scheduler or monitor.

Faults (`drods.sim.faults`, `drods.sim.control`): ``drods sim fault NAME down|up|slow MS|partition``
talks to the sim's control port, found in ``STATE_DIR/NAME.json`` (``--state-dir``, ``$DRODS_SIM_DIR``,
default ``~/.drods/sims``). down = connection refused, partition = requests hang, slow = delayed.
"""
