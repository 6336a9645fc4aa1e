"""``groupless dev-cluster up|down|env|status`` and ``groupless demo``.

Why a CLI over the local cluster: the walkthrough is the product's first impression, and it
needs a real control plane; ``groupless demo`` builds one (once), starts it, replays the
walkthrough and tears it down, while ``dev-cluster`` keeps one running for hands-on use
(``eval "$(groupless dev-cluster env)"`` then plain ``kubectl``).
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

#: The cluster every command uses without ``--name``: the demo and ``dev-cluster`` share it, so
#: ``groupless demo --keep`` is followed by ``eval "$(groupless dev-cluster env)"`` as is, and a
#: demo started while ``dev-cluster up`` runs replays on that cluster instead of starting another.
DEFAULT_NAME = "default"
NAME_HELP = (f"cluster name: its directory under $GROUPLESS_CACHE_DIR/clusters/ (default: {DEFAULT_NAME}, "
             "shared by `groupless demo` and `groupless dev-cluster`)")


def positive_int(text: str) -> int:
    """The argparse type of ``--expiry-seconds``: an integer >= 1 (raises ArgumentTypeError naming the value otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 second, got {value}")
    return value


def _stdout_safe(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a subcommand so that a closed stdout (``groupless dev-cluster status | head``) is no traceback.

    Python's documented recipe (``signal`` module docs, "Note on SIGPIPE"): flush inside the
    ``try``, and on BrokenPipeError point stdout at /dev/null so the interpreter's final flush is
    quiet. Exits 141 (128 + SIGPIPE) like a C tool killed by SIGPIPE.
    """

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            code = func(args)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 128 + signal.SIGPIPE

    return wrapper


def register(subparsers: Any) -> None:
    """Add ``dev-cluster`` and ``demo`` to the ``groupless`` parser."""
    dev = subparsers.add_parser(
        "dev-cluster",
        help="run a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok, moto, Groupless)",
        description="Run a real Kubernetes control plane on 127.0.0.1 with kwok as the kubelet and a moto "
        "server as EC2/SSM, plus Groupless's webhook, extender and controller. With --cloud-provider kwok "
        "there is no EC2: the controller's instances are the Nodes kwok runs, and moto is not started.",
    )
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="ACTION", required=True)

    up = dev_sub.add_parser("up", help="start the cluster (foreground until Ctrl-C, or --detach)")
    up.add_argument("--name", default=DEFAULT_NAME, help=NAME_HELP)
    up.add_argument("--detach", action="store_true", help="return once up; stop later with `dev-cluster down`")
    up.add_argument("--no-groupless", action="store_true", help="only the Kubernetes control plane and kwok")
    # checked by LocalCluster against localcluster.cluster.CLOUD_PROVIDERS (not imported at parse time)
    up.add_argument("--cloud-provider", default="aws", metavar="aws|kwok",
                    help="the controller's cloud provider: aws (default: EC2 and SSM on a seeded moto server) or "
                    "kwok (instances are kwok Nodes from the default kwok catalog; no moto; see docs/kwok.md)")
    up.set_defaults(func=_up)

    down = dev_sub.add_parser("down", help="stop every process of the cluster")
    down.add_argument("--name", default=DEFAULT_NAME, help=NAME_HELP)
    down.add_argument("--purge", action="store_true", help="also delete the cluster directory (logs, PKI)")
    down.set_defaults(func=_stdout_safe(_down))

    env = dev_sub.add_parser("env", help="print `export KUBECONFIG=...` etc. for a shell: eval \"$(groupless dev-cluster env)\"")
    env.add_argument("--name", default=DEFAULT_NAME, help=NAME_HELP)
    env.set_defaults(func=_stdout_safe(_env))

    status = dev_sub.add_parser("status", help="show the components, their ports and logs")
    status.add_argument("--name", default=DEFAULT_NAME, help=NAME_HELP)
    status.set_defaults(func=_stdout_safe(_status))

    demo = subparsers.add_parser(
        "demo",
        help="replay the walkthrough on a local control plane (the first thing to run)",
        description="Bring a local cluster up (or reuse a running one), replay the walkthrough step by step "
        "and tear it down unless --keep.",
    )
    demo.add_argument("--name", default=DEFAULT_NAME, help=NAME_HELP)
    demo.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    demo.add_argument("--expiry-seconds", type=positive_int, default=None, metavar="SECONDS",
                      help="ttlSecondsUntilExpired for the node-upgrade step (the walkthrough's 1800 s; default: "
                      "the node's age + 10 s, so it expires soon)")
    demo.set_defaults(func=_demo)


def _progress(started: float) -> Any:
    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def shielded_down(cluster: Any) -> list[str]:
    """``cluster.down()`` that a second Ctrl-C or SIGTERM cannot cut short; the components it stopped."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stopped: list[str] = cluster.down()
        return stopped
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def terminate_like_interrupt() -> None:
    """Make SIGTERM (``kill``, systemd, a CI runner's timeout) raise KeyboardInterrupt like Ctrl-C.

    Python's default SIGTERM action ends the process at once, skipping ``finally`` blocks: the
    components would die through PR_SET_PDEATHSIG but ``state.json`` would stay behind and
    ``dev-cluster status`` would report every component EXITED. As KeyboardInterrupt, SIGTERM
    runs the same graceful teardown as Ctrl-C.
    """
    signal.signal(signal.SIGTERM, _interrupt)


def _up(args: argparse.Namespace) -> int:
    from localcluster.build import BuildError
    from localcluster.cluster import ClusterError, LocalCluster, Settings

    cluster = LocalCluster(args.name, Settings(groupless=not args.no_groupless, cloud_provider=args.cloud_provider))
    if cluster.running():
        print(f"cluster {args.name!r} is already running", file=sys.stderr)
        _print_env(cluster.attach())
        return 0
    terminate_like_interrupt()  # `kill` stops the cluster like Ctrl-C does
    try:
        cluster.up(detach=args.detach, progress=_progress(time.monotonic()))
    except (ClusterError, BuildError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; stopped", file=sys.stderr)
        return 130
    _print_env(cluster)
    if args.detach:
        print(f"# stop it with: groupless dev-cluster down --name {args.name}", file=sys.stderr)
        return 0
    print("# running; Ctrl-C stops every component", file=sys.stderr)
    try:
        while True:
            for component in cluster.components:
                if component.process is not None and component.process.poll() is not None:
                    print(f"warning: {component.name} exited (code {component.process.returncode}); "
                          f"see {component.log}", file=sys.stderr)
                    component.process = None
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        shielded_down(cluster)
    return 0


def _down(args: argparse.Namespace) -> int:
    import shutil

    from localcluster.cluster import LocalCluster

    cluster = LocalCluster(args.name)
    stopped = cluster.down(quiet=True)
    print(f"stopped {', '.join(stopped)}" if stopped else f"cluster {args.name!r} was not running")
    if args.purge and cluster.directory.exists():
        shutil.rmtree(cluster.directory)
        print(f"removed {cluster.directory}")
    return 0


def _escape_for_double_quotes(text: str) -> str:
    """``text`` escaped for a POSIX shell's double quotes: backslash, double quote, dollar and backquote."""
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return text


def env_lines(cluster: Any) -> list[str]:
    """``export`` lines for ``eval``: PATH gets the binaries' directory prepended to the shell's own ``$PATH``.

    PATH is written as ``export PATH="<bin dir>:$PATH"``, not expanded here: the caller's PATH
    at eval time is kept, and the line stays short and readable.
    """
    lines = []
    for key, value in cluster.env().items():
        if key == "PATH":
            bin_dir = _escape_for_double_quotes(str(cluster.binaries.directory))
            lines.append(f'export PATH="{bin_dir}:$PATH"')
        else:
            lines.append(f"export {key}={shlex.quote(value)}")
    return lines


def _print_env(cluster: Any) -> None:
    for line in env_lines(cluster):
        print(line)


def _env(args: argparse.Namespace) -> int:
    from localcluster.cluster import ClusterError, LocalCluster

    try:
        cluster = LocalCluster(args.name).attach()
    except ClusterError as error:
        print(f"error: {error}; start it with `groupless dev-cluster up --name {args.name}`", file=sys.stderr)
        return 1
    _print_env(cluster)
    return 0


def component_line(name: str, entry: dict[str, Any], alive: Callable[[int], bool]) -> tuple[str, bool]:
    """One component's line of ``dev-cluster status`` and whether it is running.

    A supervised component (webhook, extender, controller) shows its own pid (not its
    supervisor's), its supervisor's state (``running``, or ``back-off`` between an exit and the
    restart) and its restart count; the others show ``restarts -``. ``EXITED``: the process
    (or the supervisor) is gone.
    """
    from localcluster.supervisor import RUNNING, SupervisedComponent

    supervised = SupervisedComponent.from_entry(entry)
    pid = entry["pid"]
    if not alive(int(entry["pgid"])):
        state = "EXITED"
    elif supervised is None:
        state = "running"
    else:
        pid = supervised.child_pid if supervised.child_pid is not None else "-"
        child_alive = supervised.child_pid is not None and alive(supervised.child_pid)
        state = RUNNING if supervised.state == RUNNING and child_alive else "back-off"
    restarts = "-" if supervised is None else str(supervised.restarts)
    line = f"  {name:<24} pid {pid!s:<8} {state:<8} restarts {restarts:<3} log {entry['log']}"
    return line, state == "running"


def _status(args: argparse.Namespace) -> int:
    from localcluster.cluster import LocalCluster, _process_alive
    from localcluster.supervisor import read_state

    cluster = LocalCluster(args.name)
    state = read_state(cluster.state_file)
    if state is None:
        print(f"cluster {args.name!r} is not running ({cluster.directory})")
        return 1
    print(f"cluster {args.name!r} in {cluster.directory}")
    print(f"  kubeconfig  {state['kubeconfig']}")
    healthy = True
    for name, entry in state["components"].items():
        line, running = component_line(name, entry, _process_alive)
        healthy &= running
        print(line)
    for name, port in sorted(state["ports"].items()):
        print(f"  port {name:<19} {port}")
    return 0 if healthy else 1


def _demo(args: argparse.Namespace) -> int:
    from localcluster.demo import run_demo

    return run_demo(name=args.name, keep=args.keep, expiry_seconds=args.expiry_seconds)
