"""The standard AG-UI HTTP endpoint: start, watch and resume runs from any AG-UI client (SSE)."""
