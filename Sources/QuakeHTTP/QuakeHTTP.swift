// QuakeHTTP: the merged catalog served back over HTTP (USGS summary feeds, an FDSN event service).
