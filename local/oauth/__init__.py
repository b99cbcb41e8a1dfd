"""OAuth for the local topology: the development authorization server (``issuer``), the
OAuth 2.1 rules it enforces (``rules``), and an OAuth client for the MCP SDK that needs no
browser, or opens one (``client``).
"""
