# Executes a notebook the way papermill does, with nbconvert's executor
# (nbclient): cells run in order in a kernel whose working directory is the
# current directory; the first failing cell stops the run; the output
# notebook is written in every case, with the outputs produced so far.
# Usage: python3 runner.py INPUT.ipynb OUTPUT.ipynb
import os
import signal
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

inp, out = sys.argv[1], sys.argv[2]
nb = nbformat.read(inp, as_version=4)
kernel_pid = []


def started(**kwargs):
    # The kernel runs in its own session (jupyter_client starts it so), so
    # it and its %%bash children are outside decree's process group: kill
    # that group ourselves when we are stopped or done.
    try:
        p = client.km.provisioner
        kernel_pid.append(getattr(p, "pgid", None) or p.pid)
    except Exception:
        pass


def kill_kernel_group(sig):
    for pid in kernel_pid:
        try:
            os.killpg(pid, sig)
        except Exception:
            pass


def write():
    nbformat.write(nb, out)


def on_term(signum, frame):
    kill_kernel_group(signal.SIGKILL)
    try:
        write()
    except Exception:
        pass
    sys.stderr.write("decree: notebook run stopped by signal %d\n" % signum)
    os._exit(128 + signum)


client = NotebookClient(
    nb,
    resources={"metadata": {"path": os.getcwd()}},
    on_notebook_start=started,
    shutdown_kernel="immediate",
)
signal.signal(signal.SIGTERM, on_term)
rc = 0
try:
    client.execute()
except CellExecutionError as e:
    rc = 1
    sys.stderr.write(str(e) + "\n")
finally:
    write()
    kill_kernel_group(signal.SIGKILL)
sys.exit(rc)
