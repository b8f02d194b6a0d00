"""Transport security and secrets: the control plane's CA and serving certificates, what clients trust."""
