"""The sample's long run: a test suite moved from Jest to Vitest, file by file.

Two hundred spec files, each read, explained and edited, with the suite run every
twenty files (once failing): a few thousand events, so the viewer's paging, trimming
and search show what they do with a run that size.
"""

from __future__ import annotations

from .script import Ending, Step, Story, Turn, edit, numbered, read, run

AREAS = ("cart", "checkout", "catalog", "search", "account", "orders", "payments", "shipping")
PARTS = (
    "api",
    "store",
    "view",
    "format",
    "hooks",
    "routes",
    "errors",
    "cache",
    "events",
    "forms",
    "filters",
    "prices",
    "totals",
    "labels",
    "session",
    "retry",
    "i18n",
    "links",
    "paging",
    "images",
    "badges",
    "modal",
    "toast",
    "empty",
    "loading",
)
#: Files converted between two runs of the suite.
CHECK_EVERY = 20


def spec_files() -> list[str]:
    return [f"src/{area}/{part}.spec.ts" for area in AREAS for part in PARTS]


def _spec(path: str) -> str:
    subject = path.rsplit("/", 1)[-1].removesuffix(".spec.ts")
    return numbered(
        f"import {{ {subject} }} from './{subject}';\n"
        f"jest.mock('../api/client');\n\n"
        f"describe('{subject}', () => {{\n"
        f"  const fetch = jest.fn().mockResolvedValue({{ ok: true }});\n"
        f"  beforeEach(() => jest.useFakeTimers());\n"
        f"  it('works', async () => {{\n"
        f"    expect(await {subject}(fetch)).toMatchSnapshot();\n"
        f"  }});\n"
        f"}});"
    )


def _steps() -> list[Step]:
    files = spec_files()
    steps: list[Step] = [
        run('grep -rl "jest\\." src | wc -l', str(len(files))),
        f"There are {len(files)} spec files using Jest's globals. I'll convert them one by "
        f"one and run the suite every {CHECK_EVERY} files.",
    ]
    for number, path in enumerate(files, 1):
        steps.append(read(path, _spec(path)))
        steps.append(
            f"In `{path}`: `jest.mock` becomes `vi.mock`, `jest.fn` becomes `vi.fn` and "
            f"the fake timers come from `vi.useFakeTimers`; the snapshot stays as it is."
        )
        steps.append(edit(path, "replace jest.* with vi.*, import vi from vitest"))
        if number % CHECK_EVERY == 0:
            steps.extend(_check(number))
    steps.append(
        f"All {len(files)} spec files run on Vitest now.\n\n"
        "- `jest.*` calls became `vi.*`, imported from `vitest`\n"
        "- `jest.config.js` is gone; `vitest.config.ts` keeps the same aliases\n"
        "- snapshots are unchanged, and the suite runs in 38 s instead of 2 min 10 s"
    )
    return steps


def _check(done: int) -> list[Step]:
    if done == 3 * CHECK_EVERY:
        failing = "src/catalog/format.spec.ts"
        return [
            run(
                "npx vitest run",
                f"FAIL {failing} > format > works\n"
                "TypeError: vi.useFakeTimers is not a function in a worker with "
                "isolate: false\nTest Files  1 failed | 59 passed (60)",
                failed=True,
            ),
            "One file shares a worker with another that restored the real timers. I'll "
            "turn isolation back on in `vitest.config.ts`.",
            edit("vitest.config.ts", "test.isolate = true"),
            run("npx vitest run", f"Test Files  {done} passed ({done})"),
        ]
    return [run("npx vitest run", f"Test Files  {done} passed ({done})")]


def vitest_migration(*, creator: str, tenant: str, model: str, days_ago: float) -> Story:
    """The long agent: one run of a few thousand events."""
    return Story(
        name="Move the test suite to Vitest",
        creator=creator,
        tenant=tenant,
        cwd=f"/home/{creator}/src/shop-web",
        model=model,
        days_ago=days_ago,
        turns=(
            Turn(
                prompt=(
                    "Move the whole test suite from Jest to Vitest. Keep the snapshots, and "
                    "run the suite as you go."
                ),
                thinking=(
                    "Vitest is mostly compatible: the globals become vi.*, the config "
                    "moves to vitest.config.ts, and snapshots keep their format. Doing it "
                    "file by file with regular runs keeps a failure close to its cause."
                ),
                steps=tuple(_steps()),
                ending=Ending.FINISHED,
                summary="Moved 200 spec files from Jest to Vitest",
            ),
        ),
    )
