import sys,json,statistics as st,collections
steps=[json.loads(l) for l in open(sys.argv[1])]
steps=[e for e in steps if e['type']=='step' and e['width']==1]
for ph,c in sorted({(e['phase'],e['context']) for e in steps}):
    s=[e for e in steps if e['phase']==ph and e['context']==c]
    quads=[s[i:i+4] for i in range(0,len(s)-3,4)]
    by=collections.defaultdict(list)
    for q in quads:
        a=sum(x['ms'] for x in q if x['arm']=='stock'); b=sum(x['ms'] for x in q if x['arm']=='patched')
        by[q[0]['rep']].append(a/b)
    ev=[st.median(v) for r,v in by.items() if r%2==0]; od=[st.median(v) for r,v in by.items() if r%2==1]
    print(ph,c,'even rounds',[round(x,3) for x in ev],'odd',[round(x,3) for x in od])
