//! `sim://simpledb` in native code: the message handling of `replicalab.sim.simpledb`
//! (seed 003 §4.3 as calibrated to seed 000), step for step and draw for draw, so a run
//! gives the history the Python scheme gives for the same seed.
//!
//! A call is a chain of steps (the request reaching its node, its queue, the item's commit
//! batch, the reply). Each step that is the next thing to happen anyway runs at once (see
//! `simrt`), so a call that meets no other event returns its result directly; otherwise
//! the chain continues from the runtime's heap and settles a future. The Python object
//! (`SimpleDB`) keeps the parameters, makes the domains' nodes and describes the store;
//! this core keeps what changes per call: the client machines' CPUs, the domains'
//! admission control, the commit batches, the buffered secondaries and the suppression of
//! repeated writes.

use std::collections::HashMap;

use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{intern, PyTraverseError};

use crate::simrt::{Clock, Delay, Next, Parked, SimNode, Stream, Window};

struct Group {
    nodes: Vec<usize>,
    last: Option<Py<PyAny>>,
    /// admission: when the work admitted so far is theoretically done (ns)
    tat: i64,
}

#[derive(Clone, Copy, PartialEq)]
enum Stage {
    Arrive,
    ReadServe,
    ReadAnswer,
    WriteServe,
}

/// One call in flight.
struct Op {
    stage: Stage,
    read: bool,
    node: usize,
    group: usize,
    keys: Py<PyAny>,
    consistent: bool,
    expect: Option<Py<PyAny>>,
    absent: Option<Py<PyAny>>,
    t0: i64,
    fut: Option<Py<PyAny>>,
}

struct Inner {
    clock: Clock,
    stream: Py<Stream>,
    scheme: Py<PyAny>,
    net: Py<PyAny>,
    slow: Py<PyDict>,
    lost: Py<PyAny>,
    cond_failed: Py<PyAny>,
    expectation_holds: Py<PyAny>,
    frozenset: Py<PyAny>,
    client_link: Delay,
    lan: Delay,
    commit: Delay,
    timeout_ns: i64,
    timeout_text: String,
    flush_ns: i64,
    cond_extra_ns: i64,
    cons_extra_ns: i64,
    item_commit_ns: i64,
    cpu_ns: i64,
    cpu_free_ns: HashMap<i64, i64>,
    read_cost_ns: i64,
    write_cost_ns: i64,
    tolerance_ns: i64,
    read_hiccup_p: f64,
    read_hiccup_ms: f64,
    write_hiccup_p: f64,
    write_hiccup_ms: f64,
    suppress: bool,
    nodes: Vec<Py<SimNode>>,
    node_ids: HashMap<usize, usize>,
    groups: Vec<Group>,
    group_ids: HashMap<usize, usize>,
    key_group: Py<PyDict>,
    key_item: Py<PyDict>,
    item_ids: Py<PyDict>,
    batches: HashMap<(usize, usize), (i64, i64)>,
    buffered: HashMap<usize, (Py<PyAny>, Py<PyAny>)>,
    ops: Parked<Op>,
}

/// The native message handling of one `sim.simpledb.SimpleDB`.
#[pyclass(module = "replicalab_native")]
pub struct SimpleDbCore {
    inner: Option<Inner>,
}

fn get<T>(o: &Bound<'_, PyAny>, name: &str) -> PyResult<T>
where
    T: for<'a, 'py> FromPyObject<'a, 'py>,
{
    o.getattr(name)?.extract::<T>().map_err(Into::into)
}

#[pymethods]
impl SimpleDbCore {
    /// The core of ``scheme`` (a ``SimpleDB`` on a ``VirtualRuntime``, drawing from the
    /// native ``stream``); ``errors`` is (Lost, ConditionNotMet), ``timer`` (``_FOR_GOOD``,
    /// ``_Timer``) of ``runtime.virtual``, ``expectation_holds`` that of ``sim.scheme``.
    #[new]
    fn py_new(py: Python<'_>, scheme: &Bound<'_, PyAny>, stream: Py<Stream>,
              errors: (Py<PyAny>, Py<PyAny>), timer: (Py<PyAny>, Py<PyAny>),
              expectation_holds: Py<PyAny>) -> PyResult<SimpleDbCore> {
        let rt = scheme.getattr("rt")?;
        let net = scheme.getattr("net")?;
        let p = scheme.getattr("p")?;
        let region = scheme.getattr("region")?;
        let lan = net.call_method1("link", (&region, &region))?;
        let timeout_ns: i64 = get(&net, "timeout_ns")?;
        let timeout_text: String = py
            .eval(c"lambda ns: f'{ns / 1e6:.0f}'", None, None)?
            .call1((timeout_ns,))?
            .extract()?;
        let inner = Inner {
            clock: Clock::new(py, &rt, timer.0, timer.1)?,
            stream,
            scheme: scheme.clone().unbind(),
            slow: net.getattr("slow_ns")?.cast_into::<PyDict>()?.unbind(),
            net: net.clone().unbind(),
            lost: errors.0,
            cond_failed: errors.1,
            expectation_holds,
            frozenset: py.import("builtins")?.getattr("frozenset")?.unbind(),
            client_link: Delay::of(&net.getattr("client_link")?)?,
            lan: Delay::of(&lan)?,
            commit: Delay::of(&scheme.getattr("commit")?)?,
            timeout_ns,
            timeout_text,
            flush_ns: get(scheme, "flush_ns")?,
            cond_extra_ns: get(scheme, "cond_extra_ns")?,
            cons_extra_ns: get(scheme, "cons_extra_ns")?,
            item_commit_ns: get(scheme, "item_commit_ns")?,
            cpu_ns: get(scheme, "cpu_ns")?,
            cpu_free_ns: get(scheme, "cpu_free_ns")?,
            read_cost_ns: get(scheme, "read_cost_ns")?,
            write_cost_ns: get(scheme, "write_cost_ns")?,
            tolerance_ns: get(scheme, "tolerance_ns")?,
            read_hiccup_p: get(&p, "read_hiccup_p")?,
            read_hiccup_ms: get(&p, "read_hiccup_ms")?,
            write_hiccup_p: get(&p, "write_hiccup_p")?,
            write_hiccup_ms: get(&p, "write_hiccup_ms")?,
            suppress: get(&p, "suppress")?,
            nodes: Vec::new(),
            node_ids: HashMap::new(),
            groups: Vec::new(),
            group_ids: HashMap::new(),
            key_group: PyDict::new(py).unbind(),
            key_item: PyDict::new(py).unbind(),
            item_ids: PyDict::new(py).unbind(),
            batches: HashMap::new(),
            buffered: HashMap::new(),
            ops: Parked::new(),
        };
        Ok(SimpleDbCore { inner: Some(inner) })
    }

    /// One GetAttributes call from a client in ``region`` on client machine ``machine``:
    /// (values, serving node name) if it completed at once, else a future of them.
    #[pyo3(signature = (region, keys, consistent, machine=0))]
    fn read(slf: &Bound<'_, Self>, region: &Bound<'_, PyAny>, keys: &Bound<'_, PyAny>,
            consistent: bool, machine: i64) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let _ = region; // one region: every client is local to the domain's replicas
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let group = me.group_of(py, keys, false)?;
        let nodes = &me.groups[group].nodes;
        let node = if consistent {
            nodes[0]
        } else {
            let n = nodes.len();
            nodes[me.stream.bind(py).borrow_mut().index(py, n)?]
        };
        me.start(py, slf, Op { stage: Stage::Arrive, read: true, node, group,
                               keys: keys.clone().unbind(), consistent, expect: None,
                               absent: None, t0: 0, fut: None }, machine)
    }

    /// One PutAttributes/BatchPutAttributes call from client machine ``machine``: the
    /// primary's name if it completed at once, else a future of it (ConditionNotMet when
    /// ``expect`` does not hold).
    #[pyo3(signature = (region, values, expect=None, absent=None, machine=0))]
    fn write(slf: &Bound<'_, Self>, region: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>,
             expect: Option<Py<PyAny>>, absent: Option<Py<PyAny>>, machine: i64)
             -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let _ = region;
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let group = me.group_of(py, values, true)?;
        let node = me.groups[group].nodes[0];
        me.start(py, slf, Op { stage: Stage::Arrive, read: false, node, group,
                               keys: values.clone().unbind(), consistent: false, expect,
                               absent, t0: 0, fut: None }, machine)
    }

    /// Continue call ``op`` at its step's time (a heap event).
    fn _resume(slf: &Bound<'_, Self>, op: usize) -> PyResult<()> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let call = me.ops.take(op).expect("a resumed call is pending");
        let mut w = me.clock.open(py)?;
        let out = me.drive(py, slf, &mut w, call, None);
        me.clock.close(py, &w)?;
        out.map(|_| ())
    }

    /// A write forwarded by the primary reaches secondary ``node`` (`Network._arrive`).
    fn _sec_arrive(slf: &Bound<'_, Self>, node: usize, values: Py<PyAny>) -> PyResult<()> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let mut w = me.clock.open(py)?;
        let n = me.nodes[node].clone_ref(py);
        let n = n.bind(py).borrow();
        if !n.up {
            return Ok(());
        }
        let svc = n.service_delay.draw(py, &mut me.stream.bind(py).borrow_mut())?;
        let wait = n.process(py, w.now, svc)?;
        drop(n);
        if wait != 0 {
            let f = slf.getattr(intern!(py, "_sec_receive"))?;
            let args = PyTuple::new(py, [node.into_pyobject(py)?.into_any(),
                                         values.into_bound(py)])?;
            let at = w.now + wait;
            me.clock.push(py, &mut w, at, None, &f, args)?;
        } else {
            me.receive(py, slf, &mut w, node, values)?;
        }
        me.clock.close(py, &w)
    }

    /// Secondary ``node`` takes a forwarded write into its buffer (`SimpleDB._receive`).
    fn _sec_receive(slf: &Bound<'_, Self>, node: usize, values: Py<PyAny>) -> PyResult<()> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let mut w = me.clock.open(py)?;
        me.receive(py, slf, &mut w, node, values)?;
        me.clock.close(py, &w)
    }

    /// Secondary ``node``'s buffer times out and applies (`SimpleDB._flush`).
    fn _flush(slf: &Bound<'_, Self>, node: usize) -> PyResult<()> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let me = this.inner.as_mut().expect("cleared");
        let w = me.clock.open(py)?;
        if let Some((values, _timer)) = me.buffered.remove(&node) {
            me.apply(py, node, values.bind(py), w.now)?;
        }
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Some(me) = &self.inner else { return Ok(()) };
        me.clock.traverse(&visit)?;
        for o in [&me.scheme, &me.net, &me.lost, &me.cond_failed, &me.expectation_holds,
                  &me.frozenset] {
            visit.call(o)?;
        }
        visit.call(&me.stream)?;
        visit.call(&me.slow)?;
        visit.call(&me.key_group)?;
        visit.call(&me.key_item)?;
        visit.call(&me.item_ids)?;
        for n in &me.nodes {
            visit.call(n)?;
        }
        for g in &me.groups {
            visit.call(&g.last)?;
        }
        for (v, t) in me.buffered.values() {
            visit.call(v)?;
            visit.call(t)?;
        }
        for op in me.ops.iter() {
            visit.call(&op.keys)?;
            visit.call(&op.expect)?;
            visit.call(&op.absent)?;
            visit.call(&op.fut)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.inner = None;
    }
}

impl Inner {
    /// The group of the elements a call touches (`SimpleDB._group`): memoised per element
    /// for one-element calls; otherwise (and the first time) the Python scheme finds or
    /// makes it (NotExpressible across domains).
    fn group_of(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, mapping: bool)
                -> PyResult<usize> {
        if keys.len()? == 1 {
            let key = if mapping {
                keys.try_iter()?.next().expect("one key")?
            } else {
                keys.get_item(0)?
            };
            if let Some(g) = self.key_group.bind(py).get_item(&key)? {
                return g.extract();
            }
            let g = self.register_group(py, keys)?;
            self.key_group.bind(py).set_item(key, g)?;
            return Ok(g);
        }
        self.register_group(py, keys)
    }

    fn register_group(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<usize> {
        let g = self.scheme.bind(py).call_method1(intern!(py, "_group_of"), (keys,))?;
        let ptr = g.as_ptr() as usize;
        if let Some(&id) = self.group_ids.get(&ptr) {
            return Ok(id);
        }
        let mut nodes = Vec::new();
        for n in g.getattr("nodes")?.cast_into::<PyList>()?.iter() {
            let p = n.as_ptr() as usize;
            let id = match self.node_ids.get(&p) {
                Some(&id) => id,
                None => {
                    let id = self.nodes.len();
                    self.nodes.push(n.cast_into::<SimNode>()?.unbind());
                    self.node_ids.insert(p, id);
                    id
                }
            };
            nodes.push(id);
        }
        let id = self.groups.len();
        self.groups.push(Group { nodes, last: None, tat: 0 });
        self.group_ids.insert(ptr, id);
        // the Python group object lives in scheme.groups for the store's life: its
        // address names it
        Ok(id)
    }

    /// Start a call at the present: the client machine's CPU, the trip to its node.
    fn start(&mut self, py: Python<'_>, slf: &Bound<'_, SimpleDbCore>, mut op: Op,
             machine: i64) -> PyResult<Py<PyAny>> {
        let mut w = self.clock.open(py)?;
        let depart = self.client_cpu_ns(w.now, machine);
        let mut trip = self.client_link.draw(py, &mut self.stream.bind(py).borrow_mut())?;
        if self.slow.bind(py).len() > 0 {
            let n = self.nodes[op.node].bind(py).borrow();
            if let Some(x) = self.slow.bind(py).get_item(n.name.bind(py))? {
                trip += x.extract::<i64>()?;
            }
        }
        op.t0 = w.now + depart;
        let due = w.now + depart + trip;
        let out = self.drive(py, slf, &mut w, op, Some(due));
        self.clock.close(py, &w)?;
        out
    }

    /// Run call `op`'s steps from its current stage, at once while each is the next thing
    /// to happen; `due`: when its current step is due (None: now, it was resumed then).
    /// Returns the result (a call finished at once), a future (it continues from the
    /// heap), or None-as-future when it had one already.
    fn drive(&mut self, py: Python<'_>, slf: &Bound<'_, SimpleDbCore>, w: &mut Window,
             mut op: Op, mut due: Option<i64>) -> PyResult<Py<PyAny>> {
        loop {
            if let Some(t) = due {
                if !w.skip_to(t) {
                    return self.suspend(py, slf, w, op, t);
                }
            }
            let next = match op.stage {
                Stage::Arrive => self.arrive(py, w, &mut op)?,
                Stage::ReadServe => self.read_serve(py, w, &mut op)?,
                Stage::ReadAnswer => self.read_answer(py, w, &op)?,
                Stage::WriteServe => self.write_serve(py, slf, w, &op)?,
            };
            match next {
                Next::At(t) => due = Some(t),
                Next::Now => due = None,
                Next::Done(v, at) => return self.settle(py, w, op, Ok(v), at),
                Next::Fail(e, at) => return self.settle(py, w, op, Err(e), at),
            }
        }
    }

    /// Park `op` until `t` on the heap; return its future.
    fn suspend(&mut self, py: Python<'_>, slf: &Bound<'_, SimpleDbCore>, w: &mut Window,
               mut op: Op, t: i64) -> PyResult<Py<PyAny>> {
        let fut = self.clock.future_of(py, &mut op.fut)?;
        let id = self.ops.park(op);
        let f = slf.getattr(intern!(py, "_resume"))?;
        let args = PyTuple::new(py, [id])?;
        self.clock.push(py, w, t, None, &f, args)?;
        Ok(fut)
    }

    /// The client has the call's outcome at `at` (`resolve_later`/`reject_later`).
    fn settle(&mut self, py: Python<'_>, w: &mut Window, op: Op, out: PyResult<Py<PyAny>>,
              at: i64) -> PyResult<Py<PyAny>> {
        let at = at.max(w.now);
        let now = w.skip_to(at);
        self.clock.settle(py, w, op.fut, now, at, out)
    }

    /// The request reaches its node (`Network._reach`): lost if the node is down,
    /// else through the node's queue.
    fn arrive(&mut self, py: Python<'_>, w: &mut Window, op: &mut Op) -> PyResult<Next> {
        let n = self.nodes[op.node].bind(py).borrow();
        if !n.up {
            let msg = format!("no reply from {} within {} ms", n.name.bind(py), self.timeout_text);
            let err = PyErr::from_value(self.lost.bind(py).call1((msg,))?);
            return Ok(Next::Fail(err, op.t0 + self.timeout_ns));
        }
        let svc = n.service_delay.draw(py, &mut self.stream.bind(py).borrow_mut())?;
        let wait = n.process(py, w.now, svc)?;
        op.stage = if op.read { Stage::ReadServe } else { Stage::WriteServe };
        Ok(if wait != 0 { Next::At(w.now + wait) } else { Next::Now })
    }

    /// The read is admitted or refused (`SimpleDB._serve_read`), then waits for the
    /// commit in progress of its items at the node, if any.
    fn read_serve(&mut self, py: Python<'_>, w: &mut Window, op: &mut Op) -> PyResult<Next> {
        op.stage = Stage::ReadAnswer;
        if self.read_cost_ns != 0 {
            if let Some(refused) = self.refuse(py, w.now, op, self.read_cost_ns)? {
                return Ok(refused);
            }
        }
        if self.batches.is_empty() {
            return Ok(Next::Now);
        }
        let now = w.now;
        let mut busy = 0i64;
        for k in op.keys.bind(py).try_iter()? {
            let item = self.item_of(py, &k?)?;
            if let Some(&(b0, b1)) = self.batches.get(&(op.node, item)) {
                if now < b1 {
                    busy = busy.max((if now >= b0 { b1 } else { b0 }) - now);
                }
            }
        }
        Ok(if busy != 0 { Next::At(now + busy) } else { Next::Now })
    }

    /// The node's values now; the client has them after the reply's trip.
    fn read_answer(&mut self, py: Python<'_>, w: &mut Window, op: &Op) -> PyResult<Next> {
        let n = self.nodes[op.node].bind(py).borrow();
        let state = n.state.bind(py);
        let keys = op.keys.bind(py);
        let values = if keys.len()? == 1 {
            let v = state.get_item(keys.get_item(0)?)?.map_or_else(|| py.None(), |v| v.unbind());
            PyTuple::new(py, [v])?
        } else {
            let mut vs = Vec::new();
            for k in keys.try_iter()? {
                vs.push(state.get_item(k?)?.map_or_else(|| py.None(), |v| v.unbind()));
            }
            PyTuple::new(py, vs)?
        };
        let mut s = self.stream.bind(py).borrow_mut();
        let mut extra = if op.consistent { self.cons_extra_ns } else { 0 };
        if self.read_hiccup_p != 0.0 {
            extra += hiccup_ns(py, &mut s, self.read_hiccup_p, self.read_hiccup_ms)?;
        }
        let reply = self.client_link.draw(py, &mut s)?;
        let out = PyTuple::new(py, [values.into_any(), n.name.bind(py).clone()])?;
        Ok(Next::Done(out.into_any().unbind(), w.now + extra + reply))
    }

    /// The write at the primary (`SimpleDB._serve_write`): decide, apply, forward; the
    /// ack waits for the item's commit batch.
    fn write_serve(&mut self, py: Python<'_>, slf: &Bound<'_, SimpleDbCore>, w: &mut Window,
                   op: &Op) -> PyResult<Next> {
        if self.write_cost_ns != 0 {
            if let Some(refused) = self.refuse(py, w.now, op, self.write_cost_ns)? {
                return Ok(refused);
            }
        }
        let primary = self.nodes[op.node].clone_ref(py);
        let pb = primary.bind(py).borrow();
        let values = op.keys.bind(py);
        let mut wait = {
            let mut s = self.stream.bind(py).borrow_mut();
            let c = self.commit.draw(py, &mut s)?;
            c + if self.write_hiccup_p != 0.0 {
                hiccup_ns(py, &mut s, self.write_hiccup_p, self.write_hiccup_ms)?
            } else {
                0
            }
        };
        if let Some(expect) = &op.expect {
            let expect = expect.bind(py);
            if expect.is_truthy()? {
                wait += self.cond_extra_ns;
                let absent = op.absent.as_ref().map_or_else(|| py.None(), |a| a.clone_ref(py));
                let holds = self.expectation_holds.bind(py)
                    .call1((pb.state.bind(py), expect, absent))?.is_truthy()?;
                if !holds {
                    let msg = format!("condition failed at {}", pb.name.bind(py));
                    let err = PyErr::from_value(self.cond_failed.bind(py).call1((msg,))?);
                    let reply = self.client_link.draw(py, &mut self.stream.bind(py).borrow_mut())?;
                    return Ok(Next::Fail(err, w.now + self.cond_extra_ns + reply));
                }
            }
        }
        let items = self.frozenset.bind(py).call1((values.call_method0(intern!(py, "items"))?,))?;
        let group = &self.groups[op.group];
        let repeated = self.suppress && match &group.last {
            Some(last) => items.le(last.bind(py))?,
            None => false,
        };
        if !repeated {
            pb.state.bind(py).call_method1(intern!(py, "update"), (values,))?;
            self.groups[op.group].last = Some(items.unbind());
            let secondaries: Vec<usize> = self.groups[op.group].nodes[1..].to_vec();
            for sec in secondaries {
                self.send(py, slf, w, &pb, sec, values)?;
            }
        }
        drop(pb);
        wait += self.commit_ns(py, op.node, values, w.now)?;
        let reply = self.client_link.draw(py, &mut self.stream.bind(py).borrow_mut())?;
        let name = primary.bind(py).borrow().name.clone_ref(py);
        Ok(Next::Done(name, w.now + wait + reply))
    }

    /// Forward `values` from the primary to secondary `sec` (`Network.send`, same region).
    fn send(&mut self, py: Python<'_>, slf: &Bound<'_, SimpleDbCore>, w: &mut Window,
            src: &SimNode, sec: usize, values: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut delay = self.lan.draw(py, &mut self.stream.bind(py).borrow_mut())?;
        let dst = self.nodes[sec].bind(py).borrow();
        let slow = self.slow.bind(py);
        if slow.len() > 0 {
            for name in [src.name.bind(py), dst.name.bind(py)] {
                if let Some(x) = slow.get_item(name)? {
                    delay += x.extract::<i64>()?;
                }
            }
        }
        // same region: no partition separates a domain's replicas
        if dst.up {
            let f = slf.getattr(intern!(py, "_sec_arrive"))?;
            let args = PyTuple::new(py, [sec.into_pyobject(py)?.into_any(), values.clone()])?;
            let at = w.now + delay;
            self.clock.push(py, w, at, None, &f, args)?;
        }
        Ok(())
    }

    /// `SimpleDB._receive`: the buffered write, if any, applies; this one is buffered
    /// until the next one or the flush timeout.
    fn receive(&mut self, py: Python<'_>, slf: &Bound<'_, SimpleDbCore>, w: &mut Window,
               node: usize, values: Py<PyAny>) -> PyResult<()> {
        if let Some((pending, timer)) = self.buffered.remove(&node) {
            self.apply(py, node, pending.bind(py), w.now)?;
            timer.bind(py).setattr(intern!(py, "cancelled"), true)?;
        }
        let timer = self.clock.timer(py)?;
        let f = slf.getattr(intern!(py, "_flush"))?;
        let args = PyTuple::new(py, [node])?;
        let at = w.now + self.flush_ns;
        self.clock.push(py, w, at, Some(&timer), &f, args)?;
        self.buffered.insert(node, (values, timer.unbind()));
        Ok(())
    }

    /// A secondary applies buffered `values` and starts their commit.
    fn apply(&mut self, py: Python<'_>, node: usize, values: &Bound<'_, PyAny>, now: i64)
             -> PyResult<()> {
        let n = self.nodes[node].clone_ref(py);
        n.bind(py).borrow().state.bind(py).call_method1(intern!(py, "update"), (values,))?;
        self.commit_ns(py, node, values, now)?;
        Ok(())
    }

    /// `SimpleDB._commit_ns`: start committing `values` at `node`; ns until it can start.
    fn commit_ns(&mut self, py: Python<'_>, node: usize, values: &Bound<'_, PyAny>, now: i64)
                 -> PyResult<i64> {
        if self.item_commit_ns == 0 {
            return Ok(0);
        }
        let mut items: Vec<usize> = Vec::new();
        for k in values.try_iter()? {
            let item = self.item_of(py, &k?)?;
            if !items.contains(&item) {
                items.push(item);
            }
        }
        let hold = self.item_commit_ns;
        let mut start = now;
        for item in items {
            match self.batches.get_mut(&(node, item)) {
                None => {
                    self.batches.insert((node, item), (now, now + hold));
                }
                Some(b) => {
                    if now >= b.1 {
                        *b = (now, now + hold);
                    } else if now >= b.0 {
                        *b = (b.1, b.1 + hold);
                        start = start.max(b.0);
                    } else {
                        start = start.max(b.0);
                    }
                }
            }
        }
        Ok(start - now)
    }

    /// The id of `key`'s item (`domain/item`), memoised.
    fn item_of(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<usize> {
        let memo = self.key_item.bind(py);
        if let Some(id) = memo.get_item(key)? {
            return id.extract();
        }
        let item = key.call_method1(intern!(py, "rsplit"), ("/", 1))?.get_item(0)?;
        let ids = self.item_ids.bind(py);
        let id = match ids.get_item(&item)? {
            Some(id) => id.extract()?,
            None => {
                let id = ids.len();
                ids.set_item(&item, id)?;
                id
            }
        };
        memo.set_item(key, id)?;
        Ok(id)
    }

    /// `SimpleDB._client_cpu_ns`: reserve one call's CPU on client machine `machine`'s
    /// core.
    fn client_cpu_ns(&mut self, now: i64, machine: i64) -> i64 {
        if self.cpu_ns == 0 {
            return 0;
        }
        let free = self.cpu_free_ns.entry(machine).or_insert(0);
        let done = (if now > *free { now } else { *free }) + self.cpu_ns;
        *free = done;
        done - now
    }

    /// `SimpleDB._admitted`: None if `op`'s domain admits `cost_ns` of its capacity now
    /// (a generic cell rate algorithm), else the refusal: ServiceUnavailable after the
    /// reply's trip.
    fn refuse(&mut self, py: Python<'_>, now: i64, op: &Op, cost_ns: i64)
              -> PyResult<Option<Next>> {
        let g = &mut self.groups[op.group];
        let tat = if g.tat > now { g.tat } else { now };
        if tat - now <= self.tolerance_ns {
            g.tat = tat + cost_ns;
            return Ok(None);
        }
        let node = self.nodes[op.node].clone_ref(py);
        let err = self.scheme.bind(py).call_method1(intern!(py, "_overloaded"), (node,))?;
        let reply = self.client_link.draw(py, &mut self.stream.bind(py).borrow_mut())?;
        Ok(Some(Next::Fail(PyErr::from_value(err), now + reply)))
    }
}

/// The extra delay in ns of a call that hits a slow server (`SimpleDB._hiccup_ns`).
fn hiccup_ns(py: Python<'_>, s: &mut Stream, p: f64, mean_ms: f64) -> PyResult<i64> {
    if p != 0.0 && s.uniform(py)? < p {
        return Ok((mean_ms * 1_000_000.0 * s.exponential(py)?) as i64);
    }
    Ok(0)
}
