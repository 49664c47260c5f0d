"""The official AG-UI client (`@ag-ui/client`, npm) driven from Python tests through node."""
