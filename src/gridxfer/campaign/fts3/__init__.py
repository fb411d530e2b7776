"""The FTS3 engine (issue 23): a campaign handed to an FTS3 server, polled into the journal."""
