"""Drives `spool app-server` with the official Codex Python SDK (PyPI openai-codex, module
openai_codex), the way a Python program would drive `codex app-server`, and asserts every step.

    python python_sdk.py SPOOL_BINARY WORKDIR SIDE_EFFECT_FILE

Run by crates/spool-cli/tests/e2e_python_sdk.rs, which starts the scripted model and passes
SPOOL_HOME and SPOOL_LOCAL_MODEL_URL in the environment (the SDK hands its environment to the
server it launches). The scripted answers below are kept in step with that test's script:

    turn 1 "first question"  -> "answer one"
    turn 2 "second question" -> "answer two"          (the model sees turn 1 in its input)
    turn 3 "append a line"   -> a shell call, escalated, that appends "ran" to SIDE_EFFECT_FILE,
                                then "appended"
    thread.compact()         -> the summary "SUMMARY: three turns so far" (a turn of its own)
    turn 5 "after compaction" -> "answer after compaction" (the model sees the summary, not
                                the turns it replaced)

Every step runs even when an earlier independent one failed, so one run lists every failure;
exits 1 if any failed, 3 if a step hung (the SDK blocks forever on a reply that never comes).
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
import time
from contextlib import contextmanager
from pathlib import Path

from openai_codex import Codex, CodexConfig
from openai_codex.generated.v2_all import (
    AgentMessageThreadItem,
    CommandExecutionStatus,
    ContextCompactionThreadItem,
    CommandExecutionThreadItem,
    TurnStatus,
    UserMessageThreadItem,
)

# The SDK is given spool as its Codex binary and launches it as it launches Codex:
# `spool app-server --listen stdio://`, with Codex's default tools (turn 3 needs the shell).

STEP_TIMEOUT_S = 60
THREAD_NAME = "python sdk thread"

failures: list[str] = []
codex: Codex | None = None


def server_stderr() -> str:
    # The SDK keeps the server's stderr tail privately; it is what explains most failures.
    client = getattr(codex, "_client", None)
    tail = getattr(client, "_stderr_tail", None)
    return tail() if callable(tail) else ""


def hung(name: str) -> None:
    print(f"FAIL {name}: no answer within {STEP_TIMEOUT_S} s", flush=True)
    print(f"spool stderr (tail):\n{server_stderr()}", flush=True)
    report(extra=[f"{name}: hung"])
    os._exit(3)  # the SDK's threads are blocked; a normal exit would wait on them


@contextmanager
def step(name: str):
    """One assertion group: failures are recorded, not raised, so later steps still run."""
    print(f"step: {name}", flush=True)
    timer = threading.Timer(STEP_TIMEOUT_S, hung, args=(name,))
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any failure of a step is reported the same way
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        # Where in this program, not the SDK's stack: the message says what the SDK saw.
        here = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__]
        line = f" (python_sdk.py:{here[-1].lineno})" if here else ""
        failures.append(f"{name}: {detail}{line}")
        print(f"FAIL {name}{line}: {detail}", flush=True)
    finally:
        timer.cancel()


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def items_of(turn_or_result) -> list:
    """The typed items of a turn (ThreadItem wraps each in `.root`)."""
    return [getattr(item, "root", item) for item in turn_or_result.items]


def expect_exchange(items: list, question: str, answer: str, where: str) -> None:
    users = [i for i in items if isinstance(i, UserMessageThreadItem)]
    agents = [i for i in items if isinstance(i, AgentMessageThreadItem)]
    texts = [getattr(c.root, "text", None) for u in users for c in u.content]
    expect(texts == [question], f"{where}: user messages {texts!r}, expected [{question!r}]")
    expect(
        [a.text for a in agents] == [answer],
        f"{where}: agent messages {[a.text for a in agents]!r}, expected [{answer!r}]",
    )


def listed_ids(response) -> list[str]:
    return [t.id for t in response.data]


def report(extra: list[str] = ()) -> None:
    all_failures = failures + list(extra)
    if all_failures:
        print(f"\n{len(all_failures)} step(s) failed:", flush=True)
        for failure in all_failures:
            print(f"  - {failure}", flush=True)
        print(f"spool stderr (tail):\n{server_stderr()}", flush=True)
    else:
        print("\nall steps passed", flush=True)


def main() -> int:
    global codex
    spool, workdir, side_effect = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    config = CodexConfig(codex_bin=spool, cwd=workdir)

    with step("initialize (Codex())"):
        codex = Codex(config)
    if codex is None:
        report()
        return 1

    try:
        run_steps(workdir, side_effect)
    finally:
        with step("close"):
            codex.close()
    report()
    return 1 if failures else 0


def run_steps(workdir: str, side_effect: Path) -> None:
    assert codex is not None

    with step("metadata"):
        # The SDK fills serverInfo from userAgent (NAME/VERSION ...) when the server sends
        # none, and refuses to start without both; the version also gates newer params.
        meta = codex.metadata
        expect("spool" in (meta.userAgent or ""), f"userAgent does not name spool: {meta!r}")
        expect(meta.serverInfo is not None, f"no server info: {meta!r}")
        expect(bool(meta.serverInfo.name), f"no server name: {meta!r}")
        expect(bool(meta.serverInfo.version), f"no server version: {meta!r}")
        platform = {"darwin": "macos"}.get(sys.platform, sys.platform)
        expect(meta.platformOs == platform, f"platformOs {meta.platformOs!r}")

    with step("models()"):
        models = codex.models().data
        expect(len(models) >= 1, "model/list returned no models")
        defaults = [m.id for m in models if m.is_default]
        expect(len(defaults) == 1, f"expected exactly one default model, got {defaults!r}")

    with step("account()"):
        account = codex.account()
        # The scripted model stands in for a local provider: no OpenAI login involved.
        expect(account.requires_openai_auth is False, f"requiresOpenaiAuth: {account!r}")
        expect(account.account is None, f"account: {account.account!r}")

    thread = None
    with step("thread_start"):
        thread = codex.thread_start(cwd=workdir)
        expect(bool(thread.id), "thread_start returned no thread id")
    if thread is None:
        return

    with step("run 1"):
        first = thread.run("first question")
        expect(first.status == TurnStatus.completed, f"status {first.status!r}")
        expect(first.final_response == "answer one", f"final_response {first.final_response!r}")
        expect_exchange(items_of(first), "first question", "answer one", "run 1 items")
        expect(first.usage is not None, "no thread/tokenUsage/updated for run 1")

    with step("run 2"):
        second = thread.run("second question")
        expect(second.status == TurnStatus.completed, f"status {second.status!r}")
        expect(second.final_response == "answer two", f"final_response {second.final_response!r}")

    with step("read(include_turns=True)"):
        read = thread.read(include_turns=True).thread
        expect(read.id == thread.id, f"read the wrong thread: {read.id}")
        expect(len(read.turns) == 2, f"{len(read.turns)} turns, expected 2")
        expect(
            all(t.status == TurnStatus.completed for t in read.turns),
            f"turn statuses {[t.status for t in read.turns]!r}",
        )
        expect_exchange(items_of(read.turns[0]), "first question", "answer one", "turn 1")
        expect_exchange(items_of(read.turns[1]), "second question", "answer two", "turn 2")
        expect(read.preview == "first question", f"preview {read.preview!r}")

    with step("set_name"):
        thread.set_name(THREAD_NAME)
        name = thread.read().thread.name
        expect(name == THREAD_NAME, f"name after set_name: {name!r}")

    with step("thread_list"):
        listed = [t for t in codex.thread_list().data if t.id == thread.id]
        expect(len(listed) == 1, f"thread {thread.id} listed {len(listed)} times")
        expect(listed[0].name == THREAD_NAME, f"listed name {listed[0].name!r}")

    with step("thread_fork"):
        fork = codex.thread_fork(thread.id)
        expect(fork.id != thread.id, "the fork has the original's id")
        forked = fork.read(include_turns=True).thread
        expect(forked.forked_from_id == thread.id, f"forkedFromId {forked.forked_from_id!r}")
        expect(len(forked.turns) == 2, f"the fork has {len(forked.turns)} turns, expected 2")
        expect_exchange(items_of(forked.turns[1]), "second question", "answer two", "fork turn 2")

    with step("thread_resume"):
        resumed = codex.thread_resume(thread.id)
        expect(resumed.id == thread.id, f"resumed {resumed.id}, expected {thread.id}")

    with step("thread_archive"):
        codex.thread_archive(thread.id)
        expect(thread.id not in listed_ids(codex.thread_list()), "archived thread still listed")
        archived = listed_ids(codex.thread_list(archived=True))
        expect(thread.id in archived, f"not among archived threads: {archived!r}")

    with step("thread_unarchive"):
        unarchived = codex.thread_unarchive(thread.id)
        expect(unarchived.id == thread.id, f"unarchived {unarchived.id}, expected {thread.id}")
        expect(thread.id in listed_ids(codex.thread_list()), "unarchived thread not listed")

    with step("run 3: a command behind an approval"):
        # Record what the SDK's default handler (it accepts) is asked and answers, without
        # changing its answer: the point is that the SDK's default is enough.
        client = codex._client
        sdk_default = client._approval_handler
        asked: list[tuple[str, dict | None, dict]] = []

        def recording(method: str, params: dict | None) -> dict:
            answer = sdk_default(method, params)
            asked.append((method, params, answer))
            return answer

        client._approval_handler = recording
        try:
            third = thread.run("append a line")
        finally:
            client._approval_handler = sdk_default
        expect(third.status == TurnStatus.completed, f"status {third.status!r}")
        expect(third.final_response == "appended", f"final_response {third.final_response!r}")
        methods = [m for m, _, _ in asked]
        expect(
            methods == ["item/commandExecution/requestApproval"],
            f"server requests {methods!r}, expected one command approval",
        )
        expect(asked[0][2] == {"decision": "accept"}, f"the SDK answered {asked[0][2]!r}")
        commands = [i for i in items_of(third) if isinstance(i, CommandExecutionThreadItem)]
        expect(len(commands) == 1, f"{len(commands)} command items, expected 1")
        expect(
            commands[0].status == CommandExecutionStatus.completed,
            f"command status {commands[0].status!r}",
        )
        expect(commands[0].exit_code == 0, f"command exit code {commands[0].exit_code!r}")
        content = side_effect.read_text() if side_effect.exists() else None
        expect(content == "ran\n", f"{side_effect} holds {content!r}, expected 'ran\\n'")

    with step("compact"):
        answer = thread.compact()
        expect(answer.model_dump(exclude_none=True) == {}, f"thread/compact/start said {answer!r}")
        # The compaction runs as a turn of its own: wait for it to end.
        deadline = time.monotonic() + STEP_TIMEOUT_S - 5
        turns = []
        while time.monotonic() < deadline:
            turns = thread.read(include_turns=True).thread.turns
            if len(turns) == 4 and turns[3].status != TurnStatus.in_progress:
                break
            time.sleep(0.1)
        expect(len(turns) == 4, f"{len(turns)} turns after compact, expected 4")
        if len(turns) == 4:
            expect(turns[3].status == TurnStatus.completed, f"compaction {turns[3].status!r}")
            kinds = [type(i).__name__ for i in items_of(turns[3])]
            expect(
                kinds == [ContextCompactionThreadItem.__name__],
                f"the compaction turn holds {kinds!r}",
            )

    with step("run 5: after compaction"):
        fifth = thread.run("after compaction")
        expect(fifth.status == TurnStatus.completed, f"status {fifth.status!r}")
        expect(
            fifth.final_response == "answer after compaction",
            f"final_response {fifth.final_response!r}",
        )


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # os._exit: the SDK's reader threads may still be blocked on a pipe.
    os._exit(code)
