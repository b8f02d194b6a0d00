"""The API server's routes, one module per resource group."""
