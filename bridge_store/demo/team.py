"""The sample team: who works in which tenant, on which models.

Tenant ``app-team`` (alice, bob, carol) works on a web shop, tenant ``platform`` (dana,
erin) on its infrastructure. The people are token names: each agent and run is
recorded as created by one of them.
"""

from __future__ import annotations

APP_TEAM, PLATFORM = "app-team", "platform"
COMPOSER, GPT, CLAUDE = "composer-2", "gpt-5", "claude-4.5-sonnet"
#: Who works in which tenant; the first of each signs in to the demo's viewer.
PEOPLE = {"alice": APP_TEAM, "bob": APP_TEAM, "carol": APP_TEAM, "dana": PLATFORM, "erin": PLATFORM}
