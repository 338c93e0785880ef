"""The sample team's agents, oldest first: two tenants, five people, three models, two
weeks (:mod:`.team`).

Between them: finished runs with tool calls (some failing), a run that failed with its
error, one that was cancelled, an archived agent, and a long migration
(:mod:`.long_run`).
"""

from __future__ import annotations

from .app_team import DARK_MODE, FLAKY_CHECKOUT, GRAPHQL_SPIKE, LOGIN, RELEASE_NOTES
from .long_run import vitest_migration
from .platform_team import CERTIFICATES, ROLLOUT, SLOW_QUERY, TERRAFORM
from .team import APP_TEAM, GPT

STORIES = (
    GRAPHQL_SPIKE,
    LOGIN,
    vitest_migration(creator="carol", tenant=APP_TEAM, model=GPT, days_ago=7.5),
    TERRAFORM,
    FLAKY_CHECKOUT,
    SLOW_QUERY,
    DARK_MODE,
    ROLLOUT,
    RELEASE_NOTES,
    CERTIFICATES,
)
