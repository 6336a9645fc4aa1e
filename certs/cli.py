"""``groupless certs generate``: a CA and a serving certificate on disk, for webhooks and the extender.

Why a command: installing without cert-manager, and the local cluster's webhook/extender,
need a serving certificate whose SANs match how kube-apiserver dials the server (a Service
DNS name, or ``127.0.0.1`` as an IP SAN), and the CA to paste into ``caBundle``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from certs.bundle import FILES, CertError, generate


def register(subparsers: Any) -> None:
    """Add ``groupless certs generate`` to the ``groupless`` command."""
    parser = subparsers.add_parser("certs", help="make TLS certificates for the webhook and the extender")
    commands = parser.add_subparsers(dest="certs_command", metavar="COMMAND", required=True)
    gen = commands.add_parser(
        "generate",
        help="write ca.crt, ca.key, tls.crt and tls.key (a new CA and a serving certificate it signs)",
        description="Write a new self-signed CA (ca.crt, ca.key) and a serving certificate (tls.crt, "
        "tls.key) with a SAN for every --dns and --ip. Keys are ECDSA P-256, written with mode 0600. "
        "Refuses to replace existing files unless --force.",
    )
    gen.add_argument("--dns", action="append", default=[], metavar="NAME",
                     help="DNS name for the serving certificate (repeatable), e.g. groupless-webhook.groupless.svc")
    gen.add_argument("--ip", action="append", default=[], metavar="ADDR",
                     help="IP address for the serving certificate (repeatable), e.g. 127.0.0.1")
    gen.add_argument("--out", required=True, metavar="DIR", help="directory to write the four PEM files into")
    gen.add_argument("--days", type=int, default=365, help="validity of the serving certificate in days (default 365)")
    gen.add_argument("--force", action="store_true",
                     help="replace the files if --out already holds any of them (a new CA: every caBundle "
                     "that trusts the old one must be updated)")
    gen.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    import datetime

    if args.days < 1:
        print("groupless certs generate: --days must be at least 1", file=sys.stderr)
        return 2
    existing = [name for name in FILES if (Path(args.out) / name).exists()]
    if existing and not args.force:
        print(f"groupless certs generate: {args.out} already holds {', '.join(existing)}; a new CA would "
              "break every caBundle that trusts the old one: pass --force to replace them", file=sys.stderr)
        return 1
    try:
        bundle = generate(args.dns, args.ip, validity=datetime.timedelta(days=args.days))
    except CertError as error:
        print(f"groupless certs generate: {error}", file=sys.stderr)
        return 2
    try:
        paths = bundle.write(args.out)
    except OSError as error:
        print(f"groupless certs generate: cannot write to {args.out}: {error.strerror}", file=sys.stderr)
        return 1
    names = ", ".join([*(f"DNS:{n}" for n in args.dns), *(f"IP:{i}" for i in args.ip)])
    print(f"Wrote {', '.join(str(p) for p in paths.values())} (SANs: {names})")
    return 0
