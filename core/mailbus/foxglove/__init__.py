"""`mailbus foxglove`: a running Mailbus system as a live data source for Foxglove and
Lichtblick, over the Foxglove WebSocket protocol (the `foxglove` extra: websockets).

protocol: the messages and their codecs (sans-IO); schema: bodies as JSON messages and
their inferred schemas; bridge: the state machine between the system and the clients;
server: the asyncio I/O loop; served: what the command serves; cli: the command."""
