"""Colony's process runtime (not a Django app): ``make run``'s launcher and supervisor, the web server,
the embedded PostgreSQL, the WSGI bridge and HTTP protocol, and the pooled PostgreSQL backend."""
