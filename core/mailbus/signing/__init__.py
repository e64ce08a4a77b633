"""Signed mail: DKIM signatures on every email Mailbus sends (when a key is configured),
verification against a keyring from the options, `require-signature`, and replay
protection. See docs/mail.md, "Signed mail".

| module | what it does |
|---|---|
| `config.py` | the `[signing]` options table, checked at load (imports no crypto) |
| `keys.py` | reads the private key (file or variable), makes ed25519 key pairs |
| `sign.py` | `Signer`: a DKIM-Signature on an email's bytes (dkimpy) |
| `verify.py` | `Verifier`: "verified", "unsigned" or "failed: why", against the keyring |
| `replay.py` | `ReplayGuard`: age window and seen Message-IDs, kept in a state dir |
| `gate.py` | `SignatureGate`: what the engine asks on receipt; `signer_from_sections` |
| `cli.py` | `mailbus keygen` |

Only `config` is imported by the options; the others load dkimpy (and dnspython, about
half a second), so the engine imports them only when a `[signing]` table asks for them.
"""
