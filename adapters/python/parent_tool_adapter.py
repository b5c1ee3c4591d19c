"""Write a parent-tool-dispatch host adapter in Python, with the standard library only.

An adapter reads one request envelope (``wp-codebox/parent-tool-request/v1``) on stdin and
prints one result envelope on stdout. This module does the envelope work, so that an adapter
is only its tool::

    #!/usr/bin/env python3
    import parent_tool_adapter as pta

    def clock(request):
        return {"utc": datetime.now(timezone.utc).isoformat()}   # the envelope's output

    pta.serve(clock)

``serve`` reads the request (the transport ``stdin``, or the file the dispatcher names with
transport ``file``), checks it is a request envelope whose ids match the ones the dispatcher
passed in ``WP_CODEBOX_PARENT_TOOL_*``, calls the handler, and prints the answer: the
handler's return value as ``output`` of a ``succeeded`` envelope, or — when it raises
``Failure`` — a ``failed`` (or ``denied``, ``unavailable``) envelope with its code. Any other
exception is an ``adapter_error`` failure whose message names the exception's type only (an
exception's text may hold a path or a secret). The exit status is 0 whenever an answer was
printed.

**Validate before acting.** A ``failed`` answer can still have done the work: check every
field of ``request["input"]`` your tool uses — types, ranges, paths inside the folder you
serve — before it changes anything, and raise ``Failure`` first.
"""

import json
import os
import sys

REQUEST_SCHEMA = "wp-codebox/parent-tool-request/v1"
RESULT_SCHEMA = "wp-codebox/parent-tool-result/v1"
STATUSES = ("failed", "denied", "unavailable", "timeout")


class Failure(Exception):
    """A refusal or failure the adapter explains: raise it from a handler."""

    def __init__(self, code, message, retryable=False, details=None, status="failed"):
        super().__init__(message)
        if status not in STATUSES:
            raise ValueError("status must be one of " + ", ".join(STATUSES))
        self.code = code
        self.message = message
        self.retryable = bool(retryable)
        self.details = details
        self.status = status


class InvalidRequest(Failure):
    """What ``read_request`` raises for a request it will not hand to a handler."""

    def __init__(self, message):
        super().__init__("request_invalid", message)


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise InvalidRequest("the request has the key %r twice" % key)
        seen[key] = value
    return seen


def read_request(stream=None, env=None):
    """The request envelope, checked: a JSON object with the request schema, version 1, string
    ``request_id``, ``tool`` and ``operation`` that match the dispatcher's variables when set,
    and an ``input``. Raises ``InvalidRequest``."""
    env = os.environ if env is None else env
    if stream is None:
        path = env.get("WP_CODEBOX_PARENT_TOOL_REQUEST_FILE")
        if path:
            with open(path, "rb") as f:
                data = f.read()
        else:
            data = sys.stdin.buffer.read()
    else:
        data = stream.read()
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest("the request is not UTF-8")
    try:
        request = json.loads(data, object_pairs_hook=_no_duplicates)
    except ValueError as e:
        if isinstance(e, InvalidRequest):
            raise
        raise InvalidRequest("the request is not one JSON document")
    if not isinstance(request, dict):
        raise InvalidRequest("the request is not a JSON object")
    if request.get("schema") != REQUEST_SCHEMA:
        raise InvalidRequest("the request's schema is not %s" % REQUEST_SCHEMA)
    if request.get("version") != 1:
        raise InvalidRequest("the request's version is not 1")
    for key in ("request_id", "tool", "operation"):
        if not isinstance(request.get(key), str) or not request[key]:
            raise InvalidRequest("the request's %s is not a non-empty string" % key)
        passed = env.get("WP_CODEBOX_PARENT_TOOL_" + key.split("_")[0].upper()
                         + ("_ID" if key == "request_id" else ""))
        if passed is not None and passed != request[key]:
            raise InvalidRequest("the request's %s is not the one the dispatcher passed" % key)
    if "input" not in request:
        raise InvalidRequest("the request has no input")
    return request


def _ids(request, env):
    """The ids to echo: the request's, else the dispatcher's variables."""
    request = request or {}
    out = {}
    for key, var in (("request_id", "REQUEST_ID"), ("tool", "TOOL"), ("operation", "OPERATION")):
        value = request.get(key)
        if not isinstance(value, str):
            value = env.get("WP_CODEBOX_PARENT_TOOL_" + var, "")
        out[key] = value
    return out


def result(request, output=None, env=None):
    """A ``succeeded`` envelope for ``request`` with ``output``."""
    env = os.environ if env is None else env
    envelope = {"schema": RESULT_SCHEMA, "version": 1}
    envelope.update(_ids(request, env))
    envelope["status"] = "succeeded"
    if output is not None:
        envelope["output"] = output
    return envelope


def failure(request, failure_, env=None):
    """The envelope of a ``Failure`` for ``request`` (which may be None: the ids then come
    from the dispatcher's variables)."""
    env = os.environ if env is None else env
    envelope = {"schema": RESULT_SCHEMA, "version": 1}
    envelope.update(_ids(request, env))
    envelope["status"] = failure_.status
    error = {"code": failure_.code, "message": failure_.message,
             "retryable": failure_.retryable}
    if failure_.details is not None:
        error["details"] = failure_.details
    envelope["error"] = error
    return envelope


def write(envelope, env=None):
    """Print ``envelope`` where the dispatcher reads the answer: stdout, or the result file
    of transport ``file`` (created 0600)."""
    env = os.environ if env is None else env
    text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")) + "\n"
    path = env.get("WP_CODEBOX_PARENT_TOOL_RESULT_FILE")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def serve(handler, env=None):
    """Read the request, run ``handler(request)``, print its answer; exit 0."""
    env = os.environ if env is None else env
    request = None
    try:
        request = read_request(env=env)
        envelope = result(request, handler(request), env)
    except Failure as f:
        envelope = failure(request, f, env)
    except Exception as e:  # a bug of the handler: no text of it leaves (it may hold a secret)
        envelope = failure(request, Failure(
            "adapter_error", "the adapter failed (%s)" % type(e).__name__), env)
    write(envelope, env)
    sys.exit(0)
