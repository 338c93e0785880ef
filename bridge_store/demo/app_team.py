"""The app team's agents: a web shop's login, tests, dark mode and release notes."""

from __future__ import annotations

from .script import Ending, Story, Turn, edit, grep, numbered, read, run
from .team import APP_TEAM, CLAUDE, COMPOSER, GPT

LOGIN_ROUTE = """from flask import Blueprint, redirect, request, url_for

bp = Blueprint("login", __name__)


@bp.post("/login")
def login():
    user = authenticate(request.form["email"], request.form["password"])
    if user is None:
        return redirect(url_for("login.form", error="invalid"))
    start_session(user)
    return redirect(url_for("home"))"""

LOGIN = Story(
    name="Fix the login redirect",
    creator="alice",
    tenant=APP_TEAM,
    cwd="/home/alice/src/shop-web",
    model=COMPOSER,
    days_ago=12.6,
    turns=(
        Turn(
            prompt=(
                "After signing in, users always land on the home page, even when they "
                "came from a product page. Keep the `next` parameter."
            ),
            thinking=(
                "The redirect after a successful login ignores where the user came from. "
                "I should read the login route, then check the tests for the next parameter."
            ),
            steps=(
                "I'll start with the login route.",
                read("shop/routes/login.py", numbered(LOGIN_ROUTE)),
                "The route always redirects to `home`. I'll keep a safe `next` instead.",
                edit(
                    "shop/routes/login.py",
                    "redirect to request.args['next'] when it is a local path, else home",
                ),
                run(
                    "pytest -q tests/test_login.py",
                    "F.\nFAILED tests/test_login.py::test_next_must_be_local - "
                    "AssertionError: redirected to https://evil.example/\n1 failed, 1 passed",
                    failed=True,
                ),
                "An absolute URL slipped through: `//evil.example/` counts as a path. "
                "I'll check the netloc too.",
                edit("shop/routes/login.py", "refuse next values whose netloc is not empty"),
                run("pytest -q tests/test_login.py", "..\n2 passed in 0.41s"),
                "Done: after signing in, users go back to the page they came from.\n\n"
                "- `next` is kept when it is a path on this site\n"
                "- anything else (`//host`, `https://...`) falls back to the home page\n"
                "- `tests/test_login.py` covers both",
            ),
            summary="Kept the next parameter on login, refusing off-site targets",
        ),
        Turn(
            prompt="Do the same for logout.",
            thinking="Logout has the same redirect; the helper I wrote can be shared.",
            steps=(
                grep(
                    'url_for("home")',
                    'shop/routes/logout.py:14:    return redirect(url_for("home"))',
                ),
                edit("shop/routes/logout.py", "use safe_next() as login does"),
                run("pytest -q tests/", "........................\n24 passed in 2.87s"),
                "Logout now uses the same `safe_next()` helper; all 24 tests pass.",
            ),
            summary="Logout keeps a local next parameter too",
            after_hours=1.5,
        ),
    ),
)

FLAKY_CHECKOUT = Story(
    name="Flaky checkout test",
    creator="bob",
    tenant=APP_TEAM,
    cwd="/home/bob/src/shop-web",
    model=CLAUDE,
    days_ago=9.2,
    turns=(
        Turn(
            prompt="test_checkout_applies_coupon fails about one run in ten on CI. Why?",
            thinking=(
                "Intermittent failures usually mean ordering or time. The coupon has an "
                "expiry; if the test builds it with now() and checks later, a slow run "
                "crosses the boundary."
            ),
            steps=(
                run(
                    "pytest -q tests/test_checkout.py -p no:randomly --count 20",
                    "....F...............\nFAILED test_checkout_applies_coupon - "
                    "assert 100.0 == 90.0\n1 failed, 19 passed",
                    failed=True,
                ),
                read(
                    "tests/test_checkout.py",
                    numbered(
                        "def test_checkout_applies_coupon(cart):\n"
                        '    coupon = Coupon("TEN", 10, expires=now() + timedelta(seconds=1))\n'
                        "    cart.apply(coupon)\n"
                        "    assert cart.total() == 90.0",
                        40,
                    ),
                ),
                "Found it: the coupon expires one second after it is made, and a slow "
                "run checks the total after that. I'll freeze the clock in the test.",
                edit("tests/test_checkout.py", "freeze time with the frozen_clock fixture"),
                run("pytest -q tests/test_checkout.py --count 200", "200 passed in 9.12s"),
                "The coupon in the test expired after one second; on a busy CI runner the "
                "total was computed after that. The test now freezes the clock (200 runs "
                "pass).",
            ),
            summary="Froze the clock in the coupon test",
        ),
        Turn(
            prompt="Now look for other tests that build expiring things with now().",
            thinking="",
            steps=(),
            ending=Ending.ERROR,
            error="[resource_exhausted] Rate limit reached for claude-4.5-sonnet; retry in 60 s",
            after_hours=0.2,
        ),
    ),
)

DARK_MODE = Story(
    name="Dark mode toggle",
    creator="alice",
    tenant=APP_TEAM,
    cwd="/home/alice/src/shop-web",
    model=COMPOSER,
    days_ago=4.3,
    turns=(
        Turn(
            prompt="Add a dark mode toggle to the header, remembered per browser.",
            thinking="I need the header template, the CSS variables and somewhere to store it.",
            steps=(
                read(
                    "shop/templates/header.html",
                    numbered("<header>\n  {% include 'nav.html' %}\n</header>"),
                ),
                "I'll add the toggle button first, then the stylesheet.",
            ),
            ending=Ending.CANCELLED,
        ),
        Turn(
            prompt=(
                "Sorry, follow the system setting (prefers-color-scheme) and only add a "
                "toggle that overrides it."
            ),
            thinking="The palette should come from prefers-color-scheme, with an override class.",
            steps=(
                edit(
                    "shop/static/theme.css", "define the palette for both schemes as CSS variables"
                ),
                edit(
                    "shop/templates/header.html",
                    "add a toggle that sets data-theme, kept in localStorage",
                ),
                run("npm run lint:css", "stylelint: 0 problems"),
                "The shop now follows the system's colour scheme. The new button in the "
                "header overrides it, and the choice is kept in `localStorage`.",
            ),
            summary="Dark mode from prefers-color-scheme, with an override toggle",
            after_hours=0.1,
        ),
    ),
)

RELEASE_NOTES = Story(
    name="Release notes for 2.4",
    creator="bob",
    tenant=APP_TEAM,
    cwd="/home/bob/src/shop-web",
    model=COMPOSER,
    days_ago=1.4,
    turns=(
        Turn(
            prompt="Write the release notes for 2.4 from the merged pull requests since 2.3.",
            thinking="git log between the tags gives the merges; group them by area.",
            steps=(
                run(
                    "git log --merges --oneline v2.3..HEAD",
                    "a1c9e2f Merge #412: keep next on login\n"
                    "77b0d13 Merge #415: dark mode\n"
                    "4f2e8aa Merge #418: vitest\n"
                    "0d93b51 Merge #421: coupon test clock",
                ),
                "## 2.4\n\n"
                "**New**\n- Dark mode, following the system setting, with a toggle (#415)\n\n"
                "**Fixed**\n- Signing in and out returns to the page you came from (#412)\n"
                "- A flaky checkout test (#421)\n\n"
                "**Internal**\n- The test suite runs on Vitest (#418)",
            ),
            summary="Release notes for 2.4",
        ),
    ),
)

GRAPHQL_SPIKE = Story(
    name="GraphQL spike",
    creator="carol",
    tenant=APP_TEAM,
    cwd="/home/carol/src/shop-api",
    model=GPT,
    days_ago=13.8,
    archived=True,
    turns=(
        Turn(
            prompt="Sketch a GraphQL endpoint for products next to the REST one.",
            thinking="A read-only schema for products and prices is enough to compare.",
            steps=(
                edit("api/graphql/schema.py", "Product and Price types, a products query"),
                run("pytest -q tests/test_graphql.py", "...\n3 passed in 0.77s"),
                "A read-only `products` query works beside REST. Not worth it yet: the "
                "REST endpoints already cover every client.",
            ),
            summary="GraphQL products query, kept as a spike",
        ),
    ),
)
