import psutil, time, sys, os
start=time.time(); seen={}
target=None
while time.time()-start<200:
    for p in psutil.process_iter(['cmdline','pid']):
        cl=' '.join(p.info['cmdline'] or [])
        if '/tmp/bench-prof.jsonl' in cl and 'extprof' not in cl and p.pid!=os.getpid():
            # deepest: the one with python in cmdline and no mlatui child
            target=p
    if target: break
    time.sleep(0.2)
last={}
while True:
    try:
        kids=[target]+target.children(recursive=True)
        for k in kids:
            for t in k.threads():
                try: comm=open(f'/proc/{k.pid}/task/{t.id}/comm').read().strip()
                except OSError: comm='?'
                last[(k.pid,t.id)]=(comm,t.user_time,t.system_time)
    except psutil.NoSuchProcess: break
    if not target.is_running(): break
    time.sleep(0.5)
tot=sum(u+s for _,u,s in last.values())
for (pid,tid),(c,u,s) in sorted(last.items(), key=lambda kv:-(kv[1][1]+kv[1][2]))[:15]:
    print(pid,tid,'main' if pid==tid else '', c, f"user {u:.1f} sys {s:.1f} {(u+s)/tot:.1%}")
