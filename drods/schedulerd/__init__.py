"""The scheduler at run time (A2, S1–S11): store informers → cache and snapshot → queue → decisions
of the pure library (`drods.scheduler`) → fenced Binding status writes, with history and metrics."""
