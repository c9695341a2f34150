#!/usr/bin/env python3
"""A decree client on grpcio (Debian: python3-grpcio, python3-grpc-tools).

Submits a message (with an idempotency key), follows it to its end with
WatchMessage while printing the routine's output live, then fetches
changes.diff and run.json.

    DECREE_CONTROLLER=127.0.0.1:7443 DECREE_TOKEN_FILE=client.token \\
        python3 client.py --routine develop --name fix-typo --body "Fix the typo" --out result.json

The Python stubs are generated from proto/ into a temporary directory at
start (grpc_tools.protoc), so nothing generated is kept in the repository.
The routine's output goes to standard output as it is produced, progress to
standard error, and --out receives a JSON summary.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import uuid

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))


def load_stubs(proto_dir):
    """Generates decree/v1/*_pb2*.py into a temporary directory and imports them."""
    out = tempfile.mkdtemp(prefix="decree-stubs-")
    well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    files = [os.path.join("decree", "v1", f) for f in sorted(os.listdir(os.path.join(proto_dir, "decree", "v1"))) if f.endswith(".proto")]
    args = ["protoc", "-I" + proto_dir, "-I" + well_known, "--python_out=" + out, "--grpc_python_out=" + out] + files
    if protoc.main(args) != 0:
        raise SystemExit("decree client: generating the Python stubs from %s failed" % proto_dir)
    sys.path.insert(0, out)
    from decree.v1 import controller_pb2, controller_pb2_grpc, types_pb2  # noqa: E402

    return controller_pb2, controller_pb2_grpc, types_pb2


def connect(pb2_grpc):
    """A channel to the controller; the client token goes on every call.

    Plain text is only for a controller on loopback started with --insecure;
    otherwise use grpc.secure_channel(address, grpc.ssl_channel_credentials(ca)).
    """
    address = os.environ.get("DECREE_CONTROLLER", "127.0.0.1:7443")
    token_file = os.environ.get("DECREE_TOKEN_FILE")
    token = open(token_file).read().strip() if token_file else os.environ.get("DECREE_TOKEN", "")
    if not token:
        raise SystemExit("decree client: set DECREE_TOKEN_FILE (a file holding the client token) or DECREE_TOKEN")
    channel = grpc.insecure_channel(address)
    return pb2_grpc.ControllerServiceStub(channel), [("authorization", "Bearer " + token)], channel


def follow(stub, meta, pb2, types_pb2, message_id):
    """Follows one message to its end, resuming from the last cursor if the stream breaks."""
    events, log, outcome, cursor = [], [], None, ""
    for attempt in range(10):
        try:
            for r in stub.WatchMessage(pb2.WatchMessageRequest(message_id=message_id, cursor=cursor), metadata=meta):
                cursor = r.cursor
                item = r.WhichOneof("item")
                if item == "event":
                    kind = types_pb2.EventKind.Name(r.event.kind)
                    events.append(kind)
                    sys.stderr.write("decree: %s %s%s\n" % (message_id, kind, ": " + r.event.text if r.event.text else ""))
                elif item == "log":
                    text = r.log.data.decode("utf-8", "replace")
                    log.append(text)
                    sys.stdout.write(text)
                    sys.stdout.flush()
                elif item == "outcome":
                    outcome = r.outcome
            if outcome is not None:
                break
        except grpc.RpcError as err:
            # UNAVAILABLE: the controller restarted; resume where we were.
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.5)
    return events, "".join(log), outcome


def artifact(stub, meta, pb2, message_id, name):
    data = b"".join(r.data for r in stub.GetArtifact(pb2.GetArtifactRequest(message_id=message_id, name=name), metadata=meta))
    return data.decode("utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routine", default="")
    ap.add_argument("--name", default="")
    ap.add_argument("--body", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--proto-dir", default=os.path.join(HERE, "..", "..", "..", "proto"))
    opts = ap.parse_args()
    pb2, pb2_grpc, types_pb2 = load_stubs(os.path.abspath(opts.proto_dir))
    stub, meta, channel = connect(pb2_grpc)
    fields = [types_pb2.Field(key="routine", value=opts.routine)] if opts.routine else []
    # One request_id per submission: a retry after a timeout cannot queue twice.
    req = pb2.SubmitMessageRequest(name=opts.name, body=opts.body.encode(), fields=fields, request_id=str(uuid.uuid4()))
    try:
        sub = stub.SubmitMessage(req, metadata=meta)
        again = stub.SubmitMessage(req, metadata=meta)
        if again.message.id != sub.message.id or not again.replayed:
            raise SystemExit("decree client: retried submit queued %s, first was %s" % (again.message.id, sub.message.id))
        message_id = sub.message.id
        sys.stderr.write("decree: queued %s as %s\n" % (sub.message.name, message_id))
        events, log, outcome = follow(stub, meta, pb2, types_pb2, message_id)
        diff = artifact(stub, meta, pb2, message_id, "changes.diff")
        run = json.loads(artifact(stub, meta, pb2, message_id, "run.json"))
    except grpc.RpcError as err:
        sys.stderr.write("decree client: %s: %s\n" % (err.code().name, err.details()))
        return 2
    finally:
        channel.close()
    state = types_pb2.MessageState.Name(outcome.state)
    summary = {
        "id": message_id, "chain": sub.message.chain, "state": state, "reason": outcome.reason,
        "attempts": outcome.attempts, "events": events, "log": log, "diff": diff, "run": run,
    }
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(summary, f, indent=2)
    sys.stderr.write("decree: %s ended %s\n" % (message_id, state))
    return 0 if state == "MESSAGE_STATE_DONE" else 1


if __name__ == "__main__":
    sys.exit(main())
