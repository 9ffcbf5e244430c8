import glob,json,sys,pandas as pd
rows=[]
for d in sorted(glob.glob('runs/*')):
    c=pd.read_csv(d+'/cells.csv'); m=json.load(open(d+'/manifest.json')); x=c.iloc[0]
    name=d.split('Z-',1)[1]; what,r=name.rsplit('-r',1); side,regime=what.split('-',1)
    rows.append(dict(side=side, regime=regime, round=int(r), stack=x['stack'], quic_endpoint=x['quic_endpoint'], commit=m['git_commit'][:9], client_cpu_ms_per_1k_ok=x.client_cpu_ms_per_1k_ok, server_cpu_ms_per_1k_ok=x.server_cpu_ms_per_1k_ok, throughput_rps=x.throughput_rps, client_rss_peak_mb=round(x.client_rss_peak_bytes/1e6,2), net_udp_rcvbuf_errors=x.net_udp_rcvbuf_errors, latency_p99_ms=x.latency_p99_us/1e3, ok=x.ok, sent=x.sent, dir=d.split('/',1)[1]))
df=pd.DataFrame(rows).sort_values(['regime','round','side']); df.to_csv('summary.csv',index=False)
print(df.drop(columns='dir').to_string(index=False))
print(df.groupby(['regime','side'])[['client_cpu_ms_per_1k_ok','server_cpu_ms_per_1k_ok','throughput_rps','client_rss_peak_mb']].median().to_string())
h1=df[(df.side=='h1')].set_index('round').client_cpu_ms_per_1k_ok
for side in ['before','after']:
    s=df[(df.side==side)&(df.regime=='newconn')].set_index('round').client_cpu_ms_per_1k_ok
    r=s/h1; print(side,'newconn h3 shared / h1 CPU', [round(v,2) for v in r], 'median', round(r.median(),2))
