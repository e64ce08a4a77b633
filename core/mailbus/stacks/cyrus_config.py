"""The configuration files of the loopback Cyrus IMAP stack (cyrus_stack.py): imapd.conf,
cyrus.conf (the master's services) and Postfix's SASL file, as text made from a stack's
paths and ports."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailbus.stacks.cyrus_stack import CyrusStack

from mailbus.stacks.loopback import HOST
from mailbus.stacks.mail_config import DOMAIN

# The server's name; also the SASL realm of a login without a domain (the admin's).
SERVERNAME = f"imap.{DOMAIN}"
# The largest message Cyrus accepts over LMTP: Postfix's message_size_limit.
MAX_MESSAGE = 10_240_000


def imapd_conf(stack: CyrusStack) -> str:
    c = stack.cyrus_dir
    lines: dict[str, object] = {
        "configdirectory": c / "config",
        "partition-default": c / "partition",
        "sievedir": c / "sieve",
        "idlesocket": c / "socket" / "idle",
        "lmtpsocket": stack.lmtp_socket,
        "notifysocket": c / "socket" / "notify",
        "servername": SERVERNAME,
        # No syslog_prefix: Cyrus writes it into every message's X-Cyrus-Session-Id, and
        # a longer one makes that header pass 78 characters, which the stdlib's
        # email package refolds when it writes the message back (an .eml round trip).
        # The master and every service run as this user (the stack's own, not root).
        "cyrus_user": stack.run_user,
        "admins": stack.admin_name,
        # Logins are user@domain, as on Dovecot; the domain is part of the mailbox name.
        "virtdomains": "userid",
        "allowplaintext": "yes",
        "sasl_pwcheck_method": "auxprop",
        "sasl_auxprop_plugin": "sasldb",
        "sasl_sasldb_path": stack.sasldb,
        "sasl_mech_list": "PLAIN LOGIN",
        "tls_server_cert": stack.cert_file,
        "tls_server_key": stack.key_file,
        "tls_versions": "tls1_2 tls1_3",
        # Deliver every copy: Mailbus's own duplicates and retries are for it to see,
        # as they are on Dovecot (Cyrus drops a Message-ID it delivered before).
        "duplicatesuppression": "no",
        # Mailbox directories by name, not by unique id. Cyrus 3.6 re-seeds rand() with
        # time(NULL) in every process that creates its first mailbox (partlist.c), and
        # this build makes unique ids from rand(): mailboxes created by two fresh
        # processes within one second get the same id, so with the default id-based
        # layout two users' INBOXes (and their Sieve scripts) were one directory and
        # each read the other's mail. The ids still collide; nothing here reads them.
        "mailbox_legacy_dirs": "yes",
        # A deleted mailbox or message is gone at once, as on Dovecot.
        "delete_mode": "immediate",
        "expunge_mode": "immediate",
        "maxmessagesize": MAX_MESSAGE,
        "maxliteral": MAX_MESSAGE * 2,
        # IMAP connections one account may hold (Dovecot's mail_max_userip_connections).
        "maxlogins_per_user": stack.max_userip_connections,
        "autocreate_users": "nobody",
        "sieve_maxscriptsize": 256,
    }
    if stack.suppress_capabilities:
        lines["suppress_capabilities"] = " ".join(stack.suppress_capabilities)
    return "".join(f"{key}: {value}\n" for key, value in lines.items())


def cyrus_conf(stack: CyrusStack) -> str:
    """The master's services. Every command names the stack's imapd.conf: without -C a
    service reads the system's /etc/imapd.conf."""
    conf = stack.imapd_conf
    imapd, idled = stack.imapd_dir / "imapd", stack.imapd_dir / "idled"
    limit = max(100, stack.max_userip_connections + 50)
    return f"""
START {{
  recover cmd="ctl_cyrusdb -C {conf} -r"
}}
SERVICES {{
  imap cmd="{imapd} -C {conf}" listen="{HOST}:{stack.imap_port}" prefork=0 maxchild={limit}
  imaps cmd="{imapd} -s -C {conf}" listen="{HOST}:{stack.imaps_port}" prefork=0 maxchild={limit}
  sieve cmd="timsieved -C {conf}" listen="{HOST}:{stack.sieve_port}" prefork=0 maxchild={limit}
  lmtpunix cmd="lmtpd -C {conf}" listen="{stack.lmtp_socket}" prefork=0 maxchild=20
}}
EVENTS {{
  checkpoint cmd="ctl_cyrusdb -C {conf} -c" period=30
}}
DAEMON {{
  # Tells every IDLE-ing imapd of a change to its mailbox at once (without idled an
  # imapd polls every imapidlepoll, 60 s).
  idled cmd="{idled} -C {conf}"
}}
"""


def postfix_sasl_conf(stack: CyrusStack) -> str:
    """Postfix's smtpd.conf: SMTP logins checked against its copy of the accounts."""
    return (
        "pwcheck_method: auxprop\n"
        "auxprop_plugin: sasldb\n"
        f"sasldb_path: {stack.postfix_sasldb}\n"
        "mech_list: PLAIN LOGIN\n"
    )
