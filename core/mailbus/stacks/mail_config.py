"""The configuration files of the loopback mail stack (mailstack.py): Dovecot's and
Postfix's, as text made from a stack's paths and ports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailbus.stacks.mailstack import MailStack

from mailbus.stacks.loopback import HOST

DOMAIN = "mailbus.test"
REJECTED = f"rejected@{DOMAIN}"  # Postfix answers 550 to this recipient
DEFERRED = f"deferred@{DOMAIN}"  # and 450 (try again later) to this one


def dovecot_conf(stack: MailStack) -> str:
    d = stack.dovecot_dir
    return f"""
base_dir = {d}/run
state_dir = {d}/state
log_path = {stack.dovecot_log}
info_log_path = {stack.dovecot_log}
instance_name = mailbus-{stack.imap_port}
# One process per IMAP connection: room for every connection the account may hold.
default_process_limit = {max(100, stack.max_userip_connections + 50)}
protocols = imap lmtp sieve
listen = {HOST}
default_internal_user = {stack.run_user}
default_internal_group = {stack.run_group}
default_login_user = {stack.run_user}
ssl = yes
ssl_cert = <{stack.cert_file}
ssl_key = <{stack.key_file}
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
mail_location = maildir:{d}/mail/%u
mail_fsync = never
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {stack.users_dir}/%n
}}
userdb {{
  driver = static
  # Home apart from the maildir: Sieve keeps its scripts there, and in the maildir
  # root `.dovecot.sieve` would read as a folder.
  args = home={d}/home/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = {HOST}
    port = {stack.imap_port}
  }}
  inet_listener imaps {{
    address = {HOST}
    port = {stack.imaps_port}
    ssl = yes
  }}
}}
service managesieve-login {{
  chroot =
  inet_listener sieve {{
    address = {HOST}
    port = {stack.sieve_port}
  }}
}}
service lmtp {{
  unix_listener lmtp {{
    mode = 0666
  }}
}}
service auth {{
  unix_listener auth-postfix {{
    mode = 0666
  }}
}}
service anvil {{
  chroot =
  # No growing delay after failed logins: tests try wrong passwords on purpose.
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service ipc {{
  chroot =
}}
service stats {{
  chroot =
}}
protocol lmtp {{
  postmaster_address = postmaster@{DOMAIN}
  # Pigeonhole Sieve on delivery (both the Postfix path and the relay deliver over
  # LMTP): the routed mode files Mailbus mail into per-topic folders with it.
  mail_plugins = $mail_plugins sieve
}}
plugin {{
  sieve = file:~/sieve;active=~/.dovecot.sieve
}}
protocol imap {{
  # Set explicitly (Dovecot's default is 10): tests go past it on purpose.
  mail_max_userip_connections = {stack.max_userip_connections}
}}
"""


def postfix_main_cf(stack: MailStack, spool: Path, data: Path) -> str:
    refuse = (
        f"inline:{{ {{ {REJECTED}=550 5.1.1 no such user }}, "
        f"{{ {DEFERRED}=450 4.2.1 mailbox busy, try again later }} }}"
    )
    return f"""
compatibility_level = 3.6
queue_directory = {spool}
data_directory = {data}
mail_owner = postfix
setgid_group = postdrop
myhostname = mx.{DOMAIN}
mydomain = {DOMAIN}
myorigin = {DOMAIN}
mydestination =
inet_interfaces = {HOST}
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
# Every participant keeps its SMTP connection open: as many smtpd as Dovecot allows
# connections (Postfix's default is 100, short of the benchmark's 100 participants).
default_process_limit = {max(100, stack.max_userip_connections + 50)}
smtpd_peername_lookup = no
smtp_dns_support_level = disabled
alias_maps =
alias_database =
local_recipient_maps =
biff = no
virtual_mailbox_domains = {DOMAIN}
virtual_transport = lmtp:unix:{stack.lmtp_socket}
smtpd_reject_unlisted_recipient = no
lmtp_destination_concurrency_limit = 8
default_destination_concurrency_limit = 8
maillog_file = {stack.postfix_log}
maillog_file_prefixes = {stack.root}
smtpd_tls_cert_file = {stack.cert_file}
smtpd_tls_key_file = {stack.key_file}
smtpd_tls_security_level = may
smtpd_tls_auth_only = yes
smtpd_sasl_auth_enable = yes
{stack.postfix_sasl_config()}
smtpd_relay_restrictions = permit_sasl_authenticated, permit_mynetworks, reject_unauth_destination
# One address the server refuses for good (5xx), to test permanent failures, and one
# it refuses for now (4xx), to test retries.
smtpd_recipient_restrictions = check_recipient_access {refuse}
message_size_limit = 10240000
# Retry quickly after Dovecot comes back (tests stop and restart it). The minimal
# backoff must be 2s, not 1s: qmgr's queue scan takes a file whose time stamp is
# at most 1s ahead, so a 1s backoff lets the next scan (queue_run_delay) take a
# message back while the lmtp agent that just deferred it still holds its lock;
# qmgr then logs "skipped, still being delivered" and parks it in incoming/ for
# 60s (qmgr_active_feed), longer than the tests wait.
queue_run_delay = 1s
transport_retry_time = 1s
minimal_backoff_time = 2s
maximal_backoff_time = 4s
"""


def postfix_master_cf(stack: MailStack) -> str:
    smtpd = "smtpd -o syslog_name=postfix/smtpd"
    smtps = "smtpd -o smtpd_tls_wrappermode=yes -o syslog_name=postfix/smtps"
    return f"""
{HOST}:{stack.smtp_port} inet n - n - - {smtpd}
{HOST}:{stack.smtps_port} inet n - n - - {smtps}
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""
