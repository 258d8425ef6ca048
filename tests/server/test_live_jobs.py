"""A live session whose background job still runs, or whose job notice waits in its agent, is never swept."""

from __future__ import annotations

import dshpy
from dshpy.agent import Agent
from dshpy.agent.builtin.job_tools import completion_notice
from dshpy.agent.jobs import jobs_of
from dshpy.llm import ChatClient, ModelConfig
from dshpy.server.limits import ServerLimits
from dshpy.server.live import Live, LiveSessions


def test_running_jobs_and_pending_job_notices_keep_a_session_live() -> None:
    now = [0.0]
    closed: list[str] = []
    sessions = LiveSessions(ServerLimits(idle_seconds=10), lambda live: closed.append(live.session.id), lambda: now[0])
    session = dshpy.open_store("memory:").create()
    live = Live(session, "/")
    with sessions.slot():
        sessions.add(live)
    job = jobs_of(session).start("bash", "sleep 600", cancel=lambda _reason: None, background=True)
    now[0] = 60.0
    assert sessions.sweep() == 0 and closed == []  # its job would be orphaned, its settlement lost
    jobs_of(session).settle(job, "completed", "exit code: 0")
    config = ModelConfig.from_env(base_url="http://127.0.0.1:9", api_key="k", env={})
    live.agent = Agent(session, ChatClient(config), resume_marker=False)
    live.agent.inject(completion_notice(job))  # the notice lives only in the agent's inbox
    assert live.jobs_pending and sessions.sweep() == 0
    live.agent = None
    assert sessions.sweep() == 1 and closed == [session.id]
