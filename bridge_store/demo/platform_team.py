"""The platform team's agents: infrastructure drift, a slow query, a stuck rollout,
certificates."""

from __future__ import annotations

from .script import Story, Turn, edit, run
from .team import CLAUDE, COMPOSER, GPT, PLATFORM

TERRAFORM = Story(
    name="Terraform plan drift",
    creator="dana",
    tenant=PLATFORM,
    cwd="/home/dana/src/infra",
    model=COMPOSER,
    days_ago=10.1,
    turns=(
        Turn(
            prompt=(
                "terraform plan shows changes nobody made on the staging database. Explain them."
            ),
            thinking=(
                "Drift: someone changed it in the console, or a provider upgrade changed "
                "its defaults."
            ),
            steps=(
                run(
                    "terraform -chdir=staging plan -no-color",
                    '  ~ resource "aws_db_instance" "shop" {\n'
                    "      ~ backup_retention_period = 3 -> 7\n"
                    "      ~ performance_insights_enabled = true -> false\n"
                    "    }\nPlan: 0 to add, 1 to change, 0 to destroy.",
                ),
                run(
                    "aws cloudtrail lookup-events --lookup-attributes "
                    "AttributeKey=ResourceName,AttributeValue=shop-staging",
                    "ModifyDBInstance  shop-staging  by erin (AWS console), 3 days ago",
                ),
                "The drift is a console change: erin turned on Performance Insights and "
                "lowered backup retention to 3 days. Either import the change into the "
                "configuration or apply the plan to undo it.",
            ),
            summary="Explained the staging database drift",
        ),
    ),
)

SLOW_QUERY = Story(
    name="Slow orders query",
    creator="erin",
    tenant=PLATFORM,
    cwd="/home/erin/src/infra",
    model=GPT,
    days_ago=6.7,
    turns=(
        Turn(
            prompt="The orders page takes 4 s in production. Find the query and fix it.",
            thinking=(
                "Check pg_stat_statements for the slowest statement by mean time, then EXPLAIN it."
            ),
            steps=(
                run(
                    'psql -c "select query, mean_exec_time from pg_stat_statements '
                    'order by 2 desc limit 1"',
                    "select * from orders where customer_id = $1 order by created_at desc | 3912.4",
                ),
                run(
                    'psql -c "explain analyze select * from orders '
                    'where customer_id = 42 order by created_at desc"',
                    "Sort  (actual time=3901.2..3903.8 rows=212)\n"
                    "  ->  Seq Scan on orders  (rows=212 loops=1)\n"
                    "        Filter: (customer_id = 42)\n"
                    "        Rows Removed by Filter: 4210388",
                ),
                "A sequential scan over 4.2 million rows. An index on "
                "`(customer_id, created_at desc)` serves both the filter and the order.",
                edit(
                    "migrations/0087_orders_customer_index.sql",
                    "create index concurrently on orders (customer_id, created_at desc)",
                ),
                "Added migration 0087, which builds the index without locking the table. "
                "On a copy of production the page's query now takes 2 ms.",
            ),
            summary="Index for the orders page (4 s to 2 ms)",
        ),
    ),
)

ROLLOUT = Story(
    name="Stuck rollout of payments",
    creator="dana",
    tenant=PLATFORM,
    cwd="/home/dana/src/infra",
    model=CLAUDE,
    days_ago=2.9,
    turns=(
        Turn(
            prompt="The payments rollout has been progressing for 20 minutes. What is wrong?",
            thinking="Look at the rollout status, then the new pods' events.",
            steps=(
                run(
                    "kubectl rollout status deploy/payments --timeout=10s",
                    "error: timed out waiting for the condition",
                    failed=True,
                ),
                run(
                    "kubectl describe pod -l app=payments,pod-template-hash=7d9f",
                    "Warning  Failed  kubelet  Failed to pull image "
                    '"registry.internal/payments:2.4.1": not found',
                ),
                "The new pods cannot pull `payments:2.4.1`: the tag was never pushed. "
                "The CI job that builds it failed on its last step; re-run it, or roll "
                "back with `kubectl rollout undo deploy/payments`.",
            ),
            summary="The rollout waits for an image tag that was never pushed",
        ),
    ),
)

CERTIFICATES = Story(
    name="Renew the staging certificates",
    creator="erin",
    tenant=PLATFORM,
    cwd="/home/erin/src/infra",
    model=COMPOSER,
    days_ago=0.3,
    turns=(
        Turn(
            prompt="Which staging certificates expire within 30 days?",
            thinking="cert-manager lists them with their expiry.",
            steps=(
                run(
                    "kubectl get certificate -A "
                    "-o custom-columns=NAME:.metadata.name,EXPIRES:.status.notAfter",
                    "NAME          EXPIRES\nshop-staging  in 12 days\napi-staging   in 81 days",
                ),
                "Only `shop-staging` expires within 30 days (in 12).",
            ),
            summary="One certificate expires within 30 days",
        ),
        Turn(
            prompt="Renew it.",
            thinking="Ask cert-manager to renew it now.",
            steps=(
                run(
                    "cmctl renew shop-staging -n staging",
                    "Manually triggered issuance of Certificate staging/shop-staging",
                ),
                run(
                    "kubectl get certificate shop-staging -n staging",
                    "NAME          READY   EXPIRES\nshop-staging  True    in 90 days",
                ),
                "Renewed: `shop-staging` is valid for 90 days.",
            ),
            summary="Renewed shop-staging",
            after_hours=0.05,
        ),
    ),
)
