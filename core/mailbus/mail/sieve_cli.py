"""`mailbus mail-sieve`: the routed mode's Sieve script, printed or installed.

Prints the script the `[mail]` table's routed-topics and routed-services make, to paste
into a provider's filter settings when it offers Sieve but no ManageSieve (Fastmail);
with `--install`, stores and activates it over ManageSieve at `[mail] url-sieve`.
"""

from __future__ import annotations

import argparse


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `mailbus --help` does not load sievelib.
    from mailbus.errors import ConfigError
    from mailbus.mail.sieve_install import SieveSettings, install_script
    from mailbus.mail.sieve_script import sieve_script
    from mailbus.mail.tls import TlsSettings
    from mailbus.mail.transport import mail_section, routes_of
    from mailbus.options import load_options

    options = load_options(args.config)
    section = mail_section(options)
    if section.get("routing") != "sieve":
        raise ConfigError("mail.routing", 'set routing = "sieve" to route topics to folders')
    script = sieve_script(routes_of(section))
    if not args.install:
        print(script, end="")
        return 0
    if "url-sieve" not in section:
        raise ConfigError("mail.url-sieve", "--install needs the ManageSieve URL")
    tls = TlsSettings(verify=options.tls_verify, ca_file=options.ca_file)
    settings = SieveSettings(section["url-sieve"], options.username, options.password, tls)
    changed = install_script(settings, script)
    print(f"{settings.server}: {'installed' if changed else 'already installed'}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "mail-sieve", help="print (or --install) the routed mode's Sieve script"
    )
    parser.add_argument(
        "--install", action="store_true", help="store and activate it over ManageSieve"
    )
    parser.set_defaults(handler=_run)
