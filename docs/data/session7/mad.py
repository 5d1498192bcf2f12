"""The spread of a recording's sweep L = 1 quads: median and MAD of log(stock/patched quad sum).
Usage: python mad.py RECORDING.jsonl[.gz]"""
import sys,json,statistics as st,math,gzip
op = gzip.open if sys.argv[1].endswith('.gz') else open
ev=[json.loads(l) for l in op(sys.argv[1],'rt')]
steps=[e for e in ev if e['type']=='step' and e['width']==1 and e['phase']=='sweep']
logs=[]
for c in sorted({e['context'] for e in steps}):
    s=[e for e in steps if e['context']==c]
    for i in range(0,len(s)-3,4):
        q=s[i:i+4]
        a=sum(x['ms'] for x in q if x['arm']=='stock'); b=sum(x['ms'] for x in q if x['arm']=='patched')
        if b>0 and a>0: logs.append(math.log(a/b))
m=st.median(logs)
mad=st.median(abs(x-m) for x in logs)
end=[e for e in ev if e['type']=='run_end']
print(f"quads {len(logs)} median {m:+.4f} MAD {mad:.4f} SD {st.pstdev(logs):.4f}")
