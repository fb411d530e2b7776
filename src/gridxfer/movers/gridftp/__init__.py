"""GridFTP: gridxfer's own GSI client, its data channels, and globus-url-copy."""
