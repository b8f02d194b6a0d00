// Every view of the dashboard, in navigation order. A view is one module exporting
// {id, title, nav, route, visible(session), render(main, ctx, params) → cleanup}; adding one
// (routes, migrations, autoscalers as they land) is a module and a line here.

import audit from "./audit.js";
import autoscaling from "./autoscaling.js";
import cluster from "./cluster.js";
import clusters from "./clusters.js";
import fleet from "./fleet.js";
import migrations from "./migrations.js";
import operations from "./operations.js";
import policies from "./policies.js";
import steering from "./steering.js";
import topology from "./topology.js";
import workload from "./workload.js";
import whatif from "./whatif.js";
import workloads from "./workloads.js";

export const VIEWS = [fleet, clusters, cluster, workloads, workload, topology, steering, autoscaling, migrations, whatif,
  policies,
  operations, audit];
