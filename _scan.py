import json, sys, time
from bounds import sweep
from constructions.cell import Cell
C = lambda att, var, task, read, norm="layernorm", affine=None: Cell(att, var, "regression", d=8, norm=norm, affine=affine, task=task, read=read)
cells = {
 "count last linear post_bare rms": C("linear","post_bare","count","last","rmsnorm"),
 "count last linear post_learned rms": C("linear","post_learned","count","last","rmsnorm"),
 "select last linear post_bare rms": C("linear","post_bare","select","last","rmsnorm"),
 "select last linear post_learned rms": C("linear","post_learned","select","last","rmsnorm"),
 "select last linear none": C("linear","none","select","last"),
 "select last linear pre_bare": C("linear","pre_bare","select","last"),
 "select last linear pre_bare rms": C("linear","pre_bare","select","last","rmsnorm"),
 "select last linear pre_learned gain": C("linear","pre_learned","select","last","layernorm","gain"),
 "count last linear pre_bare": C("linear","pre_bare","count","last"),
 "count last linear pre_learned": C("linear","pre_learned","count","last"),
 "count last linear none": C("linear","none","count","last"),
 "count last softmax post_learned": C("softmax","post_learned","count","last"),
 "count last softmax post_bare": C("softmax","post_bare","count","last"),
 "select last softmax pre_learned rms gain": C("softmax","pre_learned","select","last","rmsnorm","gain"),
}
Lmax = int(sys.argv[1])
for name, cell in cells.items():
    t = time.time()
    try:
        res = sweep.sweep(cell, sweep.grid(2, Lmax), jobs=1, closed_forms=False)
    except Exception as e:
        print(name, "ERR", e, flush=True); continue
    env = [(r["L"], r.get("B_min_own"), r["B_min"], r.get("B_min_witness_L")) for r in res["rows"] if "B_min_witness_L" in r]
    print(name, f"{time.time()-t:.0f}s", [(r["L"], round(r["B_min"],5) if r["B_min"] else None) for r in res["rows"]], "ENV:", env, flush=True)
