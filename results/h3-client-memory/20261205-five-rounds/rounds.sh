#!/usr/bin/env bash
# 5 rounds: h1 and h3 new-conn at 500 workers, pinned; client RSS peak and CPU per 1k ok.
set -eu
RUNNER=${RUNNER:-/work/main/target/release/runner}
OUT=${OUT:-/tmp/r45}
mkdir -p "$OUT"
for r in 1 2 3 4 5; do
  "$RUNNER" --stacks h1,h3 --regime new-conn --concurrency 500 --repetitions 1 --baseline-seconds 0 --pin --name "r45-round$r" --out "$OUT" --no-thresholds-exit >/dev/null 2>&1 || echo "round $r rc $?"
done
/work/main/.venv/bin/python3 - "$OUT" <<'PY'
import sys, glob, pandas as pd
rows=[]
for d in sorted(glob.glob(sys.argv[1]+'/*r45-round*')):
    c=pd.read_csv(d+'/cells.csv')
    c=c[c.stage!='baseline'] if 'stage' in c else c
    for _,x in c.iterrows():
        rows.append(dict(round=d[-1], stack=x.stack, rss_mb=x.client_rss_peak_bytes/1e6, cpu_ms_per_1k=x.client_cpu_ms_per_1k_ok, ok=x.get('ok'), sent=x.get('sent')))
df=pd.DataFrame(rows); print(df.to_string())
p=df.pivot(index='round',columns='stack',values='cpu_ms_per_1k'); p['h3/h1']=p.h3/p.h1; print(p)
print('h3 rss MB median', df[df.stack=='h3'].rss_mb.median(), 'max', df[df.stack=='h3'].rss_mb.max())
PY
