// QuakeStreams: reports pushed to quaked as they are published (EMSC's websocket).
