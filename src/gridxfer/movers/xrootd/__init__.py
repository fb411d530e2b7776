"""XRootD movers (python3-xrootd, XrdCl)."""
