//! The reads of `sim://quorum` and `sim://primary` in native code (`ReadCore`): step for
//! step and draw for draw those of `replicalab.sim.quorum` and `replicalab.sim.primary`,
//! which keep their writes, faults and catch-up in Python on the same nodes (`SimNode`),
//! the same random stream and the same runtime, so a run gives the same history.
//!
//! Reads are nearly every operation of a probe; a read that meets no other event on its
//! way finishes at once (see `simrt`), otherwise it continues from the runtime's heap and
//! settles a future, like a SimpleDB call (`simpledb`).

use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use pyo3::{intern, PyTraverseError};

use crate::simrt::{Clock, Delay, Next, Parked, SimNode, Stream, Window};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Quorum,
    Primary,
}

#[derive(Clone, Copy, PartialEq)]
enum Stage {
    /// primary: the request reaches its node and goes through its queue
    Arrive,
    /// primary: the node's values, then the reply
    Answer,
    /// quorum: the next chosen replica's snapshot (`taken` of them so far), then the reply
    Snapshot,
    /// quorum: the newest of the chosen replicas' values reach the client
    Newest,
}

struct Op {
    stage: Stage,
    region: usize,
    keys: Py<PyAny>,
    /// primary: the node; quorum: the chosen replicas in reply order
    chosen: Vec<usize>,
    /// quorum: (arrival ns after `start`, replica) in arrival order
    snaps: Vec<(i64, usize)>,
    seen: Vec<Option<Py<PyAny>>>,
    taken: usize,
    start: i64,
    done_at: i64,
    fut: Option<Py<PyAny>>,
}

struct Inner {
    kind: Kind,
    clock: Clock,
    stream: Py<Stream>,
    scheme: Py<PyAny>,
    net: Py<PyAny>,
    slow: Py<PyDict>,
    lost: Py<PyAny>,
    zero: Py<PyAny>,
    nodes: Vec<Py<SimNode>>,
    /// per region a client has read from: its name and, per node, the delay between them
    regions: Vec<Py<PyAny>>,
    region_ids: Py<PyDict>,
    delays: Vec<Vec<Delay>>,
    /// primary: per region, the nodes nearest it
    near: Vec<Vec<usize>>,
    n: usize,
    r: usize,
    w: usize,
    timeout_ns: i64,
    timeout_text: String,
    ops: Parked<Op>,
}

/// The native reads of one `Quorum` or `Primary` scheme.
#[pyclass(module = "replicalab_native")]
pub struct ReadCore {
    inner: Option<Inner>,
}

#[pymethods]
impl ReadCore {
    /// The reads of ``scheme`` (a ``Quorum`` or ``Primary`` whose nodes are SimNodes, on a
    /// ``VirtualRuntime``, drawing from the native ``stream``); ``lost`` is sim.errors.Lost,
    /// ``timer`` (``_FOR_GOOD``, ``_Timer``) of ``runtime.virtual``.
    #[new]
    fn py_new(py: Python<'_>, scheme: &Bound<'_, PyAny>, stream: Py<Stream>, lost: Py<PyAny>,
              timer: (Py<PyAny>, Py<PyAny>)) -> PyResult<ReadCore> {
        let name: String = scheme.getattr("name")?.extract()?;
        let kind = if name == "quorum" { Kind::Quorum } else { Kind::Primary };
        let rt = scheme.getattr("rt")?;
        let net = scheme.getattr("net")?;
        let p = scheme.getattr("p")?;
        let list = scheme.getattr(if kind == Kind::Quorum { "replicas" } else { "nodes" })?;
        let mut nodes = Vec::new();
        for n in list.cast_into::<PyList>()?.iter() {
            nodes.push(n.cast_into::<SimNode>()?.unbind());
        }
        let (n, r, w) = if kind == Kind::Quorum {
            (p.getattr("n")?.extract()?, p.getattr("r")?.extract()?, p.getattr("w")?.extract()?)
        } else {
            (nodes.len(), 1, 1)
        };
        let timeout_ns: i64 = net.getattr("timeout_ns")?.extract()?;
        let timeout_text: String = py
            .eval(c"lambda ns: f'{ns / 1e6:.0f}'", None, None)?
            .call1((timeout_ns,))?
            .extract()?;
        let zero = PyTuple::new(py, [PyTuple::new(py, [-1i64, -1i64])?.into_any(), py.None().into_bound(py)])?;
        Ok(ReadCore { inner: Some(Inner {
            kind,
            clock: Clock::new(py, &rt, timer.0, timer.1)?,
            stream,
            scheme: scheme.clone().unbind(),
            slow: net.getattr("slow_ns")?.cast_into::<PyDict>()?.unbind(),
            net: net.unbind(),
            lost,
            zero: zero.into_any().unbind(),
            nodes,
            regions: Vec::new(),
            region_ids: PyDict::new(py).unbind(),
            delays: Vec::new(),
            near: Vec::new(),
            n,
            r,
            w,
            timeout_ns,
            timeout_text,
            ops: Parked::new(),
        }) })
    }

    /// One read call from a client in ``region``: (values, serving node names) if it
    /// completed at once, else a future of them.
    fn read(slf: &Bound<'_, Self>, region: &Bound<'_, PyAny>, keys: &Bound<'_, PyAny>,
            consistent: bool) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let rid = me.region_id(py, region)?;
        match me.kind {
            Kind::Primary => me.start_primary(py, slf, rid, keys, consistent),
            Kind::Quorum => me.start_quorum(py, slf, rid, keys, consistent),
        }
    }

    /// Continue read ``op`` at its step's time (a heap event).
    fn _resume(slf: &Bound<'_, Self>, op: usize) -> PyResult<()> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let call = me.ops.take(op).expect("a resumed read is pending");
        let mut w = me.clock.open(py)?;
        let out = me.drive(py, slf, &mut w, call, None);
        me.clock.close(py, &w)?;
        out.map(|_| ())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Some(me) = &self.inner else { return Ok(()) };
        me.clock.traverse(&visit)?;
        for o in [&me.scheme, &me.net, &me.lost, &me.zero] {
            visit.call(o)?;
        }
        visit.call(&me.stream)?;
        visit.call(&me.slow)?;
        visit.call(&me.region_ids)?;
        for n in &me.nodes {
            visit.call(n)?;
        }
        for r in &me.regions {
            visit.call(r)?;
        }
        for op in me.ops.iter() {
            visit.call(&op.keys)?;
            visit.call(&op.fut)?;
            for s in &op.seen {
                visit.call(s)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.inner = None;
    }
}

impl Inner {
    /// The id of client region `region`; the first time, the delay to each node
    /// (`Network.client_delay`) and the nearest nodes (`Primary._near`).
    fn region_id(&mut self, py: Python<'_>, region: &Bound<'_, PyAny>) -> PyResult<usize> {
        if let Some(id) = self.region_ids.bind(py).get_item(region)? {
            return id.extract();
        }
        let net = self.net.bind(py);
        let mut delays = Vec::new();
        for n in &self.nodes {
            delays.push(Delay::of(&net.call_method1(intern!(py, "client_delay"), (region, n))?)?);
        }
        let mut near = Vec::new();
        if self.kind == Kind::Primary {
            let list = self.scheme.bind(py).call_method1(intern!(py, "_near"), (region,))?;
            for x in list.cast_into::<PyList>()?.iter() {
                let i = self.nodes.iter().position(|n| n.as_ptr() == x.as_ptr())
                    .expect("a near node is one of the scheme's nodes");
                near.push(i);
            }
        }
        let id = self.regions.len();
        self.regions.push(region.clone().unbind());
        self.delays.push(delays);
        self.near.push(near);
        self.region_ids.bind(py).set_item(region, id)?;
        Ok(id)
    }

    /// The extra one-way delay of messages to or from node `i` (`Network.extra_ns`).
    fn extra_ns(&self, py: Python<'_>, i: usize) -> PyResult<i64> {
        let slow = self.slow.bind(py);
        if slow.len() == 0 {
            return Ok(0);
        }
        let node = self.nodes[i].bind(py).borrow();
        Ok(match slow.get_item(node.name.bind(py))? {
            Some(x) => x.extract()?,
            None => 0,
        })
    }

    /// False if client region `rid` and node `i` are partitioned (`Network.reachable`).
    fn reachable(&self, py: Python<'_>, cut: bool, rid: usize, i: usize) -> PyResult<bool> {
        if !cut {
            return Ok(true);
        }
        let node = self.nodes[i].bind(py).borrow();
        self.net.bind(py)
            .call_method1(intern!(py, "reachable"), (self.regions[rid].bind(py), node.region.bind(py)))?
            .is_truthy()
    }

    fn cut(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.net.bind(py).getattr(intern!(py, "cut"))?.len()? > 0)
    }

    /// `Primary.read`: the nearest node (ties at random) or the primary, through the
    /// network kernel's request (`Network.request`).
    fn start_primary(&mut self, py: Python<'_>, slf: &Bound<'_, ReadCore>, rid: usize,
                     keys: &Bound<'_, PyAny>, consistent: bool) -> PyResult<Py<PyAny>> {
        let node = if consistent {
            0
        } else {
            let near = &self.near[rid];
            if near.len() > 1 {
                let k = near.len();
                near[self.stream.bind(py).borrow_mut().index(py, k)?]
            } else {
                near[0]
            }
        };
        let mut w = self.clock.open(py)?;
        let trip = self.delays[rid][node].draw(py, &mut self.stream.bind(py).borrow_mut())?
            + self.extra_ns(py, node)?;
        let op = Op { stage: Stage::Arrive, region: rid, keys: keys.clone().unbind(),
                      chosen: vec![node], snaps: Vec::new(), seen: Vec::new(), taken: 0,
                      start: w.now, done_at: 0, fut: None };
        let due = w.now + trip;
        let out = self.drive(py, slf, &mut w, op, Some(due));
        self.clock.close(py, &w)?;
        out
    }

    /// `Quorum.read`: ask every usable replica; the first R (N-W+1 consistent) replies
    /// count, and only their snapshots are steps of the call.
    fn start_quorum(&mut self, py: Python<'_>, slf: &Bound<'_, ReadCore>, rid: usize,
                    keys: &Bound<'_, PyAny>, consistent: bool) -> PyResult<Py<PyAny>> {
        let need = if consistent { self.n - self.w + 1 } else { self.r };
        let mut w = self.clock.open(py)?;
        let now = w.now;
        let cut = self.cut(py)?;
        let mut replies: Vec<(i64, i64, usize)> = Vec::with_capacity(self.nodes.len());
        for i in 0..self.nodes.len() {
            if !self.nodes[i].bind(py).borrow().up || !self.reachable(py, cut, rid, i)? {
                continue;
            }
            let d = self.delays[rid][i];
            let extra = self.extra_ns(py, i)?;
            let mut arrive = d.draw(py, &mut self.stream.bind(py).borrow_mut())? + extra;
            arrive += self.held_ns(py, i, now + arrive)?;
            let back = d.draw(py, &mut self.stream.bind(py).borrow_mut())?;
            replies.push((arrive + back + extra, arrive, i));
        }
        let mut op = Op { stage: Stage::Snapshot, region: rid, keys: keys.clone().unbind(),
                          chosen: Vec::new(), snaps: Vec::new(), seen: Vec::new(), taken: 0,
                          start: now, done_at: 0, fut: None };
        if replies.len() < need {
            let msg = format!("read: too few replicas answered within {} ms", self.timeout_text);
            let err = PyErr::from_value(self.lost.bind(py).call1((msg,))?);
            let out = self.settle(py, &mut w, op, Err(err), now + self.timeout_ns);
            self.clock.close(py, &w)?;
            return out;
        }
        replies.sort_by_key(|r| r.0); // stable: ties keep the nodes' order
        let chosen = &replies[..need];
        op.chosen = chosen.iter().map(|r| r.2).collect();
        let mut snaps: Vec<(i64, usize)> = chosen.iter().map(|r| (r.1, r.2)).collect();
        snaps.sort();
        op.done_at = now + replies[need - 1].0;
        op.seen = (0..need).map(|_| None).collect();
        let due = now + snaps[0].0;
        op.snaps = snaps;
        let out = self.drive(py, slf, &mut w, op, Some(due));
        self.clock.close(py, &w)?;
        out
    }

    /// How long a message reaching node `i` at `at` waits for a pause to end.
    fn held_ns(&self, py: Python<'_>, i: usize, at: i64) -> PyResult<i64> {
        let node = self.nodes[i].bind(py).borrow();
        let free: i64 = node.free_at_ns.bind(py).get_item(0)?.extract()?;
        Ok(if free > at { free - at } else { 0 })
    }

    fn drive(&mut self, py: Python<'_>, slf: &Bound<'_, ReadCore>, w: &mut Window, mut op: Op,
             mut due: Option<i64>) -> PyResult<Py<PyAny>> {
        loop {
            if let Some(t) = due {
                if !w.skip_to(t) {
                    return self.suspend(py, slf, w, op, t);
                }
            }
            let next = match op.stage {
                Stage::Arrive => self.arrive(py, w, &mut op)?,
                Stage::Answer => self.answer(py, w, &op)?,
                Stage::Snapshot => self.snapshot(py, w, &mut op)?,
                Stage::Newest => self.newest(py, w, &op)?,
            };
            match next {
                Next::At(t) => due = Some(t),
                Next::Now => due = None,
                Next::Done(v, at) => return self.settle(py, w, op, Ok(v), at),
                Next::Fail(e, at) => return self.settle(py, w, op, Err(e), at),
            }
        }
    }

    /// `Network._reach`: lost if the node is down or cut off, else through its queue.
    fn arrive(&mut self, py: Python<'_>, w: &mut Window, op: &mut Op) -> PyResult<Next> {
        let i = op.chosen[0];
        let cut = self.cut(py)?;
        let up = self.nodes[i].bind(py).borrow().up;
        if !up || !self.reachable(py, cut, op.region, i)? {
            let name = self.nodes[i].bind(py).borrow().name.clone_ref(py);
            let msg = format!("no reply from {} within {} ms", name.bind(py), self.timeout_text);
            let err = PyErr::from_value(self.lost.bind(py).call1((msg,))?);
            return Ok(Next::Fail(err, op.start + self.timeout_ns));
        }
        let n = self.nodes[i].bind(py).borrow();
        let svc = n.service_delay.draw(py, &mut self.stream.bind(py).borrow_mut())?;
        let wait = n.process(py, w.now, svc)?;
        op.stage = Stage::Answer;
        Ok(if wait != 0 { Next::At(w.now + wait) } else { Next::Now })
    }

    /// `Primary._answer_read`: the node's values now, then the reply's trip.
    fn answer(&mut self, py: Python<'_>, w: &mut Window, op: &Op) -> PyResult<Next> {
        let i = op.chosen[0];
        let values = {
            let n = self.nodes[i].bind(py).borrow();
            let state = n.state.bind(py);
            let mut vs = Vec::new();
            for k in op.keys.bind(py).try_iter()? {
                vs.push(state.get_item(k?)?.map_or_else(|| py.None(), |v| v.unbind()));
            }
            PyTuple::new(py, vs)?
        };
        let reply = self.delays[op.region][i].draw(py, &mut self.stream.bind(py).borrow_mut())?
            + self.extra_ns(py, i)?;
        let name = self.nodes[i].bind(py).borrow().name.clone_ref(py);
        let out = PyTuple::new(py, [values.into_any(), name.into_bound(py)])?;
        Ok(Next::Done(out.into_any().unbind(), w.now + reply))
    }

    /// `Quorum._snap`: the next chosen replica's snapshot of the keys.
    fn snapshot(&mut self, py: Python<'_>, _w: &mut Window, op: &mut Op) -> PyResult<Next> {
        let (_, i) = op.snaps[op.taken];
        let cells = {
            let n = self.nodes[i].bind(py).borrow();
            let state = n.state.bind(py);
            let mut cells = Vec::new();
            for k in op.keys.bind(py).try_iter()? {
                let c = state.get_item(k?)?;
                cells.push(match c {
                    Some(c) if c.is_truthy()? => c.unbind(),
                    _ => self.zero.clone_ref(py),
                });
            }
            PyTuple::new(py, cells)?
        };
        let slot = op.chosen.iter().position(|&c| c == i).expect("a chosen replica");
        op.seen[slot] = Some(cells.into_any().unbind());
        op.taken += 1;
        if op.taken < op.snaps.len() {
            return Ok(Next::At(op.start + op.snaps[op.taken].0));
        }
        op.stage = Stage::Newest;
        Ok(Next::At(op.done_at))
    }

    /// `Quorum._answer`: per key the newest cell among the chosen replicas' (the first
    /// of equal stamps, as ``max``), and the replicas' names.
    fn newest(&mut self, py: Python<'_>, _w: &mut Window, op: &Op) -> PyResult<Next> {
        let nkeys = op.keys.bind(py).len()?;
        let mut values = Vec::with_capacity(nkeys);
        for k in 0..nkeys {
            let mut best: Option<Bound<'_, PyAny>> = None;
            for s in op.seen.iter() {
                let cell = s.as_ref().expect("every chosen replica answered").bind(py)
                    .cast::<PyTuple>()?.get_item(k)?;
                best = match best {
                    None => Some(cell),
                    Some(b) => {
                        if cell.get_item(0)?.gt(b.get_item(0)?)? { Some(cell) } else { Some(b) }
                    }
                };
            }
            values.push(best.expect("at least one reply").get_item(1)?);
        }
        let names: Vec<Bound<'_, PyAny>> = op.chosen.iter()
            .map(|&i| self.nodes[i].bind(py).borrow().name.bind(py).clone()).collect();
        let joined = if names.len() == 1 {
            names[0].clone()
        } else {
            PyString::new(py, ",").call_method1(intern!(py, "join"), (names,))?
        };
        let out = PyTuple::new(py, [PyTuple::new(py, values)?.into_any(), joined])?;
        Ok(Next::Done(out.into_any().unbind(), op.done_at))
    }

    fn suspend(&mut self, py: Python<'_>, slf: &Bound<'_, ReadCore>, w: &mut Window,
               mut op: Op, t: i64) -> PyResult<Py<PyAny>> {
        let fut = self.clock.future_of(py, &mut op.fut)?;
        let id = self.ops.park(op);
        let f = slf.getattr(intern!(py, "_resume"))?;
        self.clock.push(py, w, t, None, &f, PyTuple::new(py, [id])?)?;
        Ok(fut)
    }

    /// The client has the read's outcome at `at`: directly when nothing happens first and
    /// it has no future yet, else through its future (now or from the heap).
    fn settle(&mut self, py: Python<'_>, w: &mut Window, op: Op, out: PyResult<Py<PyAny>>,
              at: i64) -> PyResult<Py<PyAny>> {
        let at = at.max(w.now);
        // the reply of a quorum read is its last step, due when its snapshots are taken:
        // Quorum._answer settles at once, at its own time
        let now = if op.stage == Stage::Newest && at == w.now { true } else { w.skip_to(at) };
        self.clock.settle(py, w, op.fut, now, at, out)
    }
}
