"""The host relay: one IMAP reader per host and account fanning every email out to the
participant processes of the host over a Unix socket (docs/mail.md, "Sharing one
receiver on a host")."""
