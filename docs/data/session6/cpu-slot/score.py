import sys,re,glob,collections
groups=collections.defaultdict(list)
for f in sorted(glob.glob('/tmp/slotx/*.md')):
    name=f.split('/')[-1][:-3]; g=re.sub(r'-?s?\d+$','',name) or name
    txt=open(f).read()
    cells=[];
    for sec in ('aa-stock','aa-patched'):
        m=re.search(r'## sweep/%s \(sweep\)(.*?)(\n## |\Z)'%sec,txt,re.S)
        if not m: continue
        for line in m.group(1).splitlines():
            p=line.split('|')
            if len(p)>6 and p[1].strip().isdigit():
                r=re.findall(r'[\d.]+',p[5]); 
                if len(r)>=3:
                    med,lo,hi=map(float,r[:3]); cells.append((sec,p[1].strip(),p[2].strip(),med,lo<=1<=hi))
    out=[c for c in cells if not c[4]]
    print(f"{name:14s} cells {len(cells):2d} outside {len(out)}: "+", ".join(f"{c[0][3:]} {c[1]} L{c[2]} {c[3]:.3f}" for c in out))
