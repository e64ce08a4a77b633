"""Email over real mail servers: SMTP through pycurl, IMAP through imapclient, TLS.

`create_transport(options, tracer)` (in `mailbus.mail.transport`) is what the context
calls for `transport = "email"`; the sender and receiver can also be used alone.
"""
