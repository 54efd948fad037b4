"""What both HTTP doors (`serve` and `mcp --http`) put in front of their ASGI app: the Host/Origin check
(origin.py) and the slow-peer and idle-connection limits of the uvicorn server (connections.py). Below the
doors, so each uses them without importing the other."""
