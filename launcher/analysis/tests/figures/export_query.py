"""Reads a `cuprof export` dataset with a real engine and prints, as JSON, the figures that
`cuprof report` computes: top kernels, GPU busy time per rank, step latency per rank, the
slowest rank of each step, and communication time under compute per rank. Usage: export_query.py duckdb|spark DATASET_DIR

Exit status 3 when the engine is not installed (the Rust test names scripts/test.sh then)."""

import json
import sys

TABLES = ["kernels", "copies", "steps"]

TOP_KERNELS = """
SELECT name, count(*) AS n, sum(end_ns - start_ns) AS total
FROM kernels GROUP BY name ORDER BY total DESC, name"""

# Union of each device's kernel, memcpy and memset intervals (gaps and islands), per rank.
BUSY = """
WITH ops AS (
  SELECT rank, device, start_ns s, end_ns e FROM kernels WHERE end_ns > start_ns
  UNION ALL
  SELECT rank, device, start_ns, end_ns FROM copies WHERE end_ns > start_ns),
o AS (SELECT *, max(e) OVER (PARTITION BY rank, device ORDER BY s, e
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
      FROM ops),
g AS (SELECT *, sum(CASE WHEN prev_end IS NULL OR s > prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY rank, device ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
      FROM o)
SELECT rank, sum(e1 - s1) AS busy
FROM (SELECT rank, device, island, min(s) s1, max(e) e1 FROM g GROUP BY rank, device, island) i
GROUP BY rank ORDER BY rank"""

STEPS = """
SELECT rank, count(*) AS n, sum(end_ns - start_ns) AS total, min(end_ns - start_ns) AS lo,
       max(end_ns - start_ns) AS hi, {p50} AS p50
FROM steps GROUP BY rank ORDER BY rank"""

SLOWEST = """
SELECT step, rank, dur FROM (
  SELECT step, rank, dur,
         row_number() OVER (PARTITION BY step ORDER BY dur DESC, rank) AS k,
         count(*) OVER (PARTITION BY step) AS ranks
  FROM (SELECT step, rank, max(end_ns - start_ns) AS dur FROM steps GROUP BY step, rank) d) r
WHERE k = 1 AND ranks >= 2 ORDER BY step"""


# Communication (nccl) time under compute per rank, both sides unions: a sweep over kernel edges.
OVERLAP = """
WITH e AS (
  SELECT rank, device, start_ns AS t, name NOT ILIKE '%nccl%' AS compute, 1 AS d
  FROM kernels WHERE end_ns > start_ns
  UNION ALL
  SELECT rank, device, end_ns, name NOT ILIKE '%nccl%', -1 FROM kernels WHERE end_ns > start_ns),
r AS (SELECT rank, t,
             sum(CASE WHEN compute THEN d ELSE 0 END) OVER w AS computing,
             sum(CASE WHEN compute THEN 0 ELSE d END) OVER w AS communicating,
             lead(t) OVER (PARTITION BY rank, device ORDER BY t, d) AS next_t
      FROM e WINDOW w AS (PARTITION BY rank, device ORDER BY t, d ROWS UNBOUNDED PRECEDING))
SELECT rank, sum(CASE WHEN computing > 0 AND communicating > 0 THEN next_t - t ELSE 0 END)
FROM r GROUP BY rank ORDER BY rank"""


def figures(sql, p50):
    rows = lambda q: [tuple(r) for r in sql(q)]
    return {
        "top_kernels": [[n, int(c), int(t)] for n, c, t in rows(TOP_KERNELS)],
        "busy": [[int(r), int(b)] for r, b in rows(BUSY)],
        "steps": [
            [int(r), int(n), int(t), int(lo), int(hi), float(p)]
            for r, n, t, lo, hi, p in rows(STEPS.format(p50=p50))
        ],
        "slowest": [[int(s), int(r), int(d)] for s, r, d in rows(SLOWEST)],
        "overlap": [[int(r), int(o)] for r, o in rows(OVERLAP)],
    }


def duckdb_figures(d):
    import duckdb

    con = duckdb.connect()
    for t in TABLES:
        con.execute(
            f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{d}/{t}/**/*.parquet', hive_partitioning = true)"
        )
    return figures(lambda q: con.execute(q).fetchall(), "quantile_cont(end_ns - start_ns, 0.5)")


def spark_figures(d):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("cuprof-export-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for t in TABLES:
            spark.read.parquet(f"{d}/{t}").createOrReplaceTempView(t)
        return figures(lambda q: spark.sql(q).collect(), "percentile(end_ns - start_ns, 0.5)")
    finally:
        spark.stop()


def main():
    engine, d = sys.argv[1], sys.argv[2]
    try:
        __import__("duckdb" if engine == "duckdb" else "pyspark")
    except ImportError as e:
        print(f"missing: {e}", file=sys.stderr)
        sys.exit(3)
    f = duckdb_figures(d) if engine == "duckdb" else spark_figures(d)
    print(json.dumps(f))


main()
