#!/usr/bin/env node
// AMQP 1.0 scenarios driven with rhea against a local RabbitMQ; writes a JSON-lines log
// (the ground truth of a capture): what the client sent, received and settled, and every
// frame rhea itself wrote or read (its rhea:frames / rhea:raw debug channels, bytes in hex).
//   node rhea_client.js --scenario outcomes --log FILE --src 127.0.10.1 [--port 5672]
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const net = require('net');
const util = require('util');
const debug = require('debug');
const rhea = require('rhea');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const HOST = args.host || '127.0.0.1';
const PORT = parseInt(args.port || '5672', 10);
const SRC = args.src || '127.0.0.1';
const USER = args.user || 'guest';
const PASSWORD = args.password || 'guest';
const PREFIX = args.prefix || 'amqpcap10-rhea';
const out = fs.openSync(args.log, 'w');
let seq = 0;

function emit(ev) {
    ev.seq = seq++;
    ev.ts = Date.now() / 1000;
    fs.writeSync(out, JSON.stringify(ev) + '\n');
}

function sha256(buf) { return crypto.createHash('sha256').update(buf).digest('hex'); }

// rhea's own frame log: a frame line ("[id]:ch -> open {...}") and a raw line with the bytes.
// Sent frames log the frame line first, received frames the raw line first.
const pendingRecv = {};
const pendingSent = {};
debug.enable('rhea:frames,rhea:raw');
debug.log = function () {
    const s = util.format.apply(null, arguments);
    let m = /\[([^\]]+)\] (SENT|RECV): (\d+) ([0-9a-f]*)/.exec(s);
    if (m) {
        const [, id, kind, size, hex] = m;
        if (kind === 'SENT') {
            const f = pendingSent[id] || { performative: 'unknown', channel: null };
            delete pendingSent[id];
            emit({ ev: 'frame', conn: id, dir: 'c2s', channel: f.channel, performative: f.performative, fields: f.fields, size: +size, hex: hex });
        } else {
            pendingRecv[id] = { size: +size, hex: hex };
        }
        return;
    }
    m = /\[([^\]]+)\]:(\d+) (->|<-) (\S+)/.exec(s);
    if (m) {
        const [, id, ch, arrow, perf] = m;
        const name = perf === 'empty' ? 'empty' : perf;
        // the frame line's arguments: format, id, channel, performative type, performative, payload
        const fields = name === 'empty' ? null : performativeJson(arguments[4]);
        if (arrow === '->') {
            pendingSent[id] = { performative: name, channel: +ch, fields: fields };
        } else {
            const r = pendingRecv[id] || {};
            delete pendingRecv[id];
            emit({ ev: 'frame', conn: id, dir: 's2c', channel: +ch, performative: name, fields: fields, size: r.size, hex: r.hex });
        }
        return;
    }
    m = /\[([^\]]+)\] (->|<-) (.*)$/.exec(s);
    if (m && /protocol_id/.test(m[3])) {
        emit({ ev: 'header', conn: m[1], dir: m[2] === '->' ? 'c2s' : 's2c', header: m[3].trim() });
    }
};

// rhea's own reading of a performative: its fields by name (described values as {descriptor, value})
function performativeJson(p) {
    if (!p || typeof p !== 'object') return null;
    const o = {};
    for (const k of Object.keys(p)) {
        if (k.startsWith('_') || typeof p[k] === 'function') continue;
        o[k] = fieldJson(p[k]);
    }
    return o;
}

function fieldJson(v) {
    if (v === undefined || v === null) return null;
    if (Buffer.isBuffer(v)) return { binary_hex: v.toString('hex') };
    if (Array.isArray(v)) return v.map(fieldJson);
    if (typeof v === 'object') {
        if (v.descriptor !== undefined && v.value !== undefined) {
            const d = v.descriptor.value !== undefined ? v.descriptor.value : v.descriptor;
            return { descriptor: typeof d === 'object' ? fieldJson(d) : d, value: fieldJson(v.value) };
        }
        if (v.type && v.type.name && 'value' in v) return fieldJson(v.value);
        const o = {};
        for (const k of Object.keys(v)) if (typeof v[k] !== 'function') o[k] = fieldJson(v[k]);
        return o;
    }
    if (typeof v === 'bigint') return v.toString();
    return v;
}

function connect(label, opts) {
    const container = rhea.create_container({ id: opts.container_id });
    const o = Object.assign({
        host: HOST, port: PORT, username: USER, password: PASSWORD, reconnect: false,
        connect: (port, host, _o, cb) => net.connect({ port: port, host: host, localAddress: SRC }, cb),
    }, opts);
    delete o.container_id;
    return new Promise((resolve) => {
        const conn = container.connect(o);
        conn.label = label;
        conn.on('connection_open', (ctx) => {
            const s = conn.socket;
            emit({ ev: 'connection_open', conn: conn.options.id, label: label, client_port: s && s.localPort,
                container_id: container.id, user: o.username, password: o.password,
                requested: { max_frame_size: o.max_frame_size, idle_time_out: o.idle_time_out, channel_max: o.channel_max },
                remote: openJson(conn.remote.open) });
            resolve(conn);
        });
        conn.on('connection_error', (ctx) => {
            emit({ ev: 'connection_error', conn: conn.options.id, label: label, error: errJson(conn.error) });
        });
        conn.on('disconnected', (ctx) => {
            const s = conn.socket;
            emit({ ev: 'disconnected', conn: conn.options.id, label: label, client_port: s && s.localPort,
                error: errJson(ctx.error || conn.error), password: o.password, user: o.username });
            resolve(conn);
        });
        conn.on('connection_close', () => emit({ ev: 'connection_close', conn: conn.options.id, label: label,
            error: errJson(conn.remote.close && conn.remote.close.error) }));
        conn.on('session_error', (ctx) => emit({ ev: 'session_error', conn: conn.options.id, label: label,
            error: errJson(ctx.session.error) }));
        conn.on('error', (e) => emit({ ev: 'error', conn: conn.options.id, label: label, error: String(e) }));
    });
}

const OPEN = ['container_id', 'hostname', 'max_frame_size', 'channel_max', 'idle_time_out', 'outgoing_locales',
    'incoming_locales', 'offered_capabilities', 'desired_capabilities', 'properties'];

function openJson(o) {
    const r = {};
    if (o) for (const k of OPEN) if (o[k] !== undefined && o[k] !== null) r[k] = unwrap(o[k]);
    return r;
}

function errJson(e) {
    if (!e) return null;
    if (e.condition !== undefined) return { condition: String(e.condition), description: e.description === undefined ? null : String(e.description) };
    return { message: String(e.message || e) };
}

function unwrap(v) {
    if (v === undefined || v === null) return v;
    if (Buffer.isBuffer(v)) return { binary_hex: v.toString('hex') };
    if (v instanceof Date) return { timestamp_ms: v.getTime() };
    if (Array.isArray(v)) return v.map(unwrap);
    if (typeof v === 'object' && v.type && v.type.name && 'value' in v) return { type: v.type.name.toLowerCase(), value: unwrap(v.value) };
    if (typeof v === 'object') {
        const o = {};
        for (const k of Object.keys(v)) o[k] = unwrap(v[k]);
        return o;
    }
    return v;
}

const PROPS = ['message_id', 'user_id', 'to', 'subject', 'reply_to', 'correlation_id', 'content_type',
    'content_encoding', 'absolute_expiry_time', 'creation_time', 'group_id', 'group_sequence', 'reply_to_group_id'];
const HEADER = ['durable', 'priority', 'ttl', 'first_acquirer', 'delivery_count'];

function bodyBytes(body) {
    if (body === undefined || body === null) return { kind: 'none', bytes: Buffer.alloc(0) };
    if (body.typecode === 0x75 && Buffer.isBuffer(body.content)) return { kind: 'data', bytes: body.content };
    if (Buffer.isBuffer(body)) return { kind: 'amqp-value binary', bytes: body };
    if (typeof body === 'string') return { kind: 'amqp-value string', bytes: Buffer.from(body, 'utf8') };
    return { kind: 'other', bytes: Buffer.from(JSON.stringify(unwrap(body)) || '') };
}

function messageJson(msg) {
    const m = {};
    for (const k of HEADER.concat(PROPS)) if (msg[k] !== undefined) m[k] = unwrap(msg[k] && msg[k].value !== undefined && msg[k].typecode ? msg[k].value : msg[k]);
    for (const k of ['application_properties', 'message_annotations', 'delivery_annotations', 'footer']) {
        if (msg[k] !== undefined) m[k] = unwrap(msg[k]);
    }
    const b = bodyBytes(msg.body);
    m.body_kind = b.kind;
    m.body_len = b.bytes.length;
    m.body_sha256 = sha256(b.bytes);
    if (b.bytes.length <= 64) m.body_hex = b.bytes.toString('hex');
    return m;
}

function deliveryJson(d) {
    return { delivery_id: d.id, delivery_tag_hex: d.tag ? Buffer.from(d.tag).toString('hex') : null,
        settled: !!d.settled, remote_settled: !!d.remote_settled, format: d.format };
}

function outcomeOf(state) {
    if (!state) return null;
    const kinds = ['accepted', 'rejected', 'released', 'modified', 'received'];
    const name = state.constructor && state.constructor.composite_type || kinds.find((k) => M['is_' + k](state));
    const o = { outcome: name || 'unknown' };
    if (state.error) o.error = errJson(state.error);
    if (state.delivery_failed !== undefined) o.delivery_failed = state.delivery_failed;
    if (state.undeliverable_here !== undefined) o.undeliverable_here = state.undeliverable_here;
    return o;
}

function linkJson(l) {
    return { name: l.name, role: l.is_sender() ? 'sender' : 'receiver', handle: l.local.handle,
        source: l.options && l.options.source ? l.options.source.address || null : null,
        target: l.options && l.options.target ? l.options.target.address || null : null,
        snd_settle_mode: l.local.attach.snd_settle_mode, rcv_settle_mode: l.local.attach.rcv_settle_mode };
}

function linkTimeout(l, resolve, what) {
    const t = setTimeout(() => { emit(Object.assign({ ev: 'link_timeout', conn: l.connection.options.id, note: what }, linkJson(l))); resolve(l); }, 3000);
    const stop = () => clearTimeout(t);
    for (const e of ['sender_open', 'receiver_open', 'sender_close', 'receiver_close']) l.once(e, stop);
}

function openSender(owner, address, opts) {
    return new Promise((resolve) => {
        const o = Object.assign({ target: { address: address } }, opts || {});
        const s = owner.open_sender(o);
        const conn = s.connection;
        linkTimeout(s, resolve, 'no attach or detach within 3 s');
        s.on('sender_open', () => {
            emit(Object.assign({ ev: 'attached', conn: conn.options.id, remote_target: s.remote.attach.target ? unwrap(s.remote.attach.target.address) : null }, linkJson(s)));
            resolve(s);
        });
        s.on('sender_error', () => emit(Object.assign({ ev: 'link_error', conn: conn.options.id, error: errJson(s.error) }, linkJson(s))));
        s.on('sender_close', () => {
            emit(Object.assign({ ev: 'detached', conn: conn.options.id, error: errJson(s.remote.detach && s.remote.detach.error) }, linkJson(s)));
            resolve(s);
        });
        for (const evn of ['accepted', 'rejected', 'released', 'modified']) {
            s.on(evn, (ctx) => emit({ ev: 'outcome', conn: conn.options.id, link: s.name, side: 'sender',
                ...deliveryJson(ctx.delivery), ...outcomeOf(ctx.delivery.remote_state), message_id: ctx.delivery.amqpcap_mid }));
        }
    });
}

function openReceiver(owner, address, opts) {
    return new Promise((resolve) => {
        const o = Object.assign({ source: { address: address }, autoaccept: false }, opts || {});
        const r = owner.open_receiver(o);
        const conn = r.connection;
        linkTimeout(r, resolve, 'no attach or detach within 3 s');
        r.on('receiver_open', () => {
            emit(Object.assign({ ev: 'attached', conn: conn.options.id, remote_source: r.remote.attach.source ? unwrap(r.remote.attach.source.address) : null }, linkJson(r)));
            resolve(r);
        });
        r.on('receiver_error', () => emit(Object.assign({ ev: 'link_error', conn: conn.options.id, error: errJson(r.error) }, linkJson(r))));
        r.on('receiver_close', () => {
            emit(Object.assign({ ev: 'detached', conn: conn.options.id, error: errJson(r.remote.detach && r.remote.detach.error) }, linkJson(r)));
            resolve(r);
        });
    });
}

function send(s, msg, note) {
    const d = s.send(msg);
    d.amqpcap_mid = msg.message_id === undefined ? null : unwrap(msg.message_id);
    emit(Object.assign({ ev: 'send', conn: s.connection.options.id, link: s.name, note: note || null,
        message: messageJson(msg) }, deliveryJson(d)));
    return d;
}

// wait until every given delivery is settled by the broker (or the time is up)
function settledAll(deliveries, ms) {
    return new Promise((resolve) => {
        const t0 = Date.now();
        (function poll() {
            if (deliveries.every((d) => d.remote_settled || d.settled && d.link.snd_settle_mode === 1) || Date.now() - t0 > ms) resolve();
            else setTimeout(poll, 20);
        })();
    });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// receive n messages on r; decide(msg, delivery, count) returns [outcome, params]
function receive(r, n, decide, ms) {
    return new Promise((resolve) => {
        let got = 0;
        const timer = setTimeout(() => { r.removeListener('message', on); resolve(got); }, ms || 10000);
        function on(ctx) {
            const d = ctx.delivery;
            emit(Object.assign({ ev: 'receive', conn: r.connection.options.id, link: r.name,
                message: messageJson(ctx.message) }, deliveryJson(d)));
            const [outcome, params] = decide(ctx.message, d, got);
            if (outcome === 'accepted') d.accept();
            else if (outcome === 'rejected') d.reject(params);
            else if (outcome === 'released') d.release();
            else if (outcome === 'modified') d.modified(params);
            if (outcome) emit({ ev: 'settle', conn: r.connection.options.id, link: r.name, side: 'receiver',
                delivery_id: d.id, delivery_tag_hex: Buffer.from(d.tag).toString('hex'), outcome: outcome,
                params: unwrap(params) || null, message_id: unwrap(ctx.message.message_id) });
            got++;
            if (got >= n) { clearTimeout(timer); r.removeListener('message', on); resolve(got); }
        }
        r.on('message', on);
    });
}

function closeConn(conn) {
    return new Promise((resolve) => {
        conn.once('connection_close', () => resolve());
        conn.once('disconnected', () => resolve());
        conn.close();
        setTimeout(resolve, 5000);
    });
}

function closeLink(l) {
    return new Promise((resolve) => {
        l.once(l.is_sender() ? 'sender_close' : 'receiver_close', () => resolve());
        l.close();
        setTimeout(resolve, 3000);
    });
}

function body(tag, n) {
    // fixed bytes: sha256 chain seeded by the tag
    const parts = [];
    let h = Buffer.from(tag);
    let len = 0;
    while (len < n) { h = crypto.createHash('sha256').update(h).digest(); parts.push(h); len += h.length; }
    return Buffer.concat(parts).subarray(0, n);
}

const T = rhea.types;
const M = rhea.message;

function fullMessage(i, queue) {
    return {
        durable: true, priority: 7, ttl: 600000, first_acquirer: false,
        message_id: 'rhea-msg-' + i, user_id: Buffer.from(USER), to: queue, subject: 'subject-' + i,
        reply_to: '/queue/' + PREFIX + '-replies', correlation_id: T.wrap_ulong(1000 + i),
        content_type: 'application/octet-stream', content_encoding: 'identity',
        absolute_expiry_time: new Date(Date.UTC(2030, 0, 2, 3, 4, 5)), creation_time: new Date(Date.UTC(2026, 0, 1, 0, 0, i)),
        group_id: 'group-a', group_sequence: i, reply_to_group_id: 'group-r',
        message_annotations: { 'x-opt-amqpcap': 'annotation-' + i },
        application_properties: {
            str: 'text-' + i, int: T.wrap_int(-42), long: T.wrap_long(1234567890123), bool: true,
            double: T.wrap_double(3.25), ubyte: T.wrap_ubyte(200), ts: T.wrap_timestamp(1767225600000),
            uuid: T.wrap_uuid(rhea.string_to_uuid('6f1c1a52-3b5e-4c39-9a51-2f0b1c2d3e4f')), nil: null,
        },
        body: M.data_section(body('rhea-full-' + i, 48 + i)),
    };
}

const scenarios = {};

// one publisher (full properties, amqp-value / data / amqp-sequence bodies, pre-settled link,
// an unroutable message) and consumers settling with each outcome
scenarios.outcomes = async function () {
    const q = '/queue/' + PREFIX + '-outcomes';
    const pub = await connect('publisher', { container_id: 'amqpcap-rhea-publisher', id: 'pub', hostname: 'localhost' });
    const s = await openSender(pub, q, { name: 'rhea-outcomes-sender' });
    const ds = [];
    ds.push(send(s, fullMessage(0, q), 'all properties, data body'));
    ds.push(send(s, { message_id: 'rhea-msg-1', subject: 'amqp-value string', body: 'hello from rhea' }, 'amqp-value string'));
    ds.push(send(s, { message_id: T.wrap_uuid(rhea.string_to_uuid('0e2f2d36-58f0-4b68-8e6e-7fb3c6c4a8a1')),
        subject: 'amqp-sequence', body: M.sequence_section([1, 'two', true]) }, 'uuid message-id, amqp-sequence body'));
    for (const [i, what] of [[3, 'reject'], [4, 'release'], [5, 'modify-failed'], [6, 'modify-undeliverable'], [7, 'accept']]) {
        ds.push(send(s, { message_id: 'rhea-msg-' + i, subject: what, application_properties: { settle: what },
            body: M.data_section(body('rhea-out-' + i, 100)) }, 'to be settled by the consumer: ' + what));
    }
    await settledAll(ds, 5000);
    const ps = await openSender(pub, q, { name: 'rhea-presettled-sender', snd_settle_mode: 1 });
    for (let i = 8; i < 11; i++) {
        send(ps, { message_id: 'rhea-msg-' + i, subject: 'pre-settled', body: M.data_section(body('rhea-pre-' + i, 32)) }, 'pre-settled');
    }
    await closeLink(s);
    await closeLink(ps);

    // a message the broker cannot route (exchange without a binding for the key)
    const us = await openSender(pub, '/exchange/amq.direct/' + PREFIX + '-no-binding', { name: 'rhea-unroutable-sender' });
    await settledAll([send(us, { message_id: 'rhea-unroutable', body: M.data_section(body('rhea-unroutable', 16)) }, 'unroutable')], 3000);
    await closeLink(us);
    await closeLink(s);
    await closeLink(ps);
    await closeConn(pub);

    // consumer 1 accepts, rejects and releases (a released message comes back: accepted then);
    // it holds the two messages to be modified and settles one of them last, with modified:
    // RabbitMQ's 1.0 plugin (3.x) answers modified with end(amqp:invalid-field) and a close
    const con = await connect('consumer', { container_id: 'amqpcap-rhea-consumer', id: 'con', hostname: 'localhost' });
    const r = await openReceiver(con, q, { name: 'rhea-outcomes-receiver', credit_window: 20 });
    const seen = {};
    const held = {};
    const decide = (msg, d) => {
        const what = msg.application_properties && msg.application_properties.settle;
        const id = String(msg.message_id);
        seen[id] = (seen[id] || 0) + 1;
        if (what === 'reject') return ['rejected', { condition: 'amqp:precondition-failed', description: 'rejected by amqpcap rhea consumer' }];
        if (what === 'release' && seen[id] === 1) return ['released'];
        if (what && what.startsWith('modify')) { held[what] = [msg, d]; return [null]; }
        return ['accepted'];
    };
    // 11 sent; the released one comes back once more
    await receive(r, 12, decide, 8000);
    await sleep(300);
    settleHeld(r, held['modify-failed'], { delivery_failed: true, undeliverable_here: false });
    await closeConn(con);
    await sleep(300);

    // consumer 2 gets the two held messages again and modifies the other with undeliverable-here
    const con2 = await connect('consumer-2', { container_id: 'amqpcap-rhea-consumer-2', id: 'con2' });
    const r2 = await openReceiver(con2, q, { name: 'rhea-outcomes-receiver-2', credit_window: 5 });
    const held2 = {};
    await receive(r2, 2, (msg, d) => { held2[msg.application_properties.settle] = [msg, d]; return [null]; }, 5000);
    settleHeld(r2, held2['modify-undeliverable'], { delivery_failed: true, undeliverable_here: true });
    await closeConn(con2);
    await sleep(300);

    // consumer 3 accepts what is left
    const con3 = await connect('consumer-3', { container_id: 'amqpcap-rhea-consumer-3', id: 'con3' });
    const r3 = await openReceiver(con3, q, { name: 'rhea-outcomes-receiver-3', credit_window: 5 });
    await receive(r3, 2, () => ['accepted'], 5000);
    await sleep(300);
    await closeLink(r3);
    await closeConn(con3);
};

function settleHeld(r, held, params) {
    if (!held) return;
    const [msg, d] = held;
    d.modified(params);
    emit({ ev: 'settle', conn: r.connection.options.id, link: r.name, side: 'receiver', delivery_id: d.id,
        delivery_tag_hex: Buffer.from(d.tag).toString('hex'), outcome: 'modified', params: params,
        message_id: unwrap(msg.message_id) });
}

// max-frame-size 512 on both connections: 3 kB and 20 kB messages split over many transfers
scenarios.frames512 = async function () {
    const q = '/queue/' + PREFIX + '-frames512';
    const pub = await connect('publisher', { container_id: 'amqpcap-rhea-publisher-512', id: 'pub', max_frame_size: 512 });
    const s = await openSender(pub, q, { name: 'rhea-512-sender' });
    const ds = [];
    ds.push(send(s, { message_id: 'rhea-small', body: M.data_section(body('rhea-512-small', 100)) }, 'fits one frame'));
    ds.push(send(s, { message_id: 'rhea-3k', application_properties: { size: 3072 }, body: M.data_section(body('rhea-512-3k', 3072)) }, '3 kB, multi-frame'));
    ds.push(send(s, { message_id: 'rhea-20k', application_properties: { size: 20480 }, body: M.data_section(body('rhea-512-20k', 20480)) }, '20 kB, multi-frame'));
    ds.push(send(s, { message_id: 'rhea-3k-value', body: body('rhea-512-3kv', 3000).toString('base64') }, '3 kB amqp-value string, multi-frame'));
    await settledAll(ds, 5000);
    await closeLink(s);
    const con = await connect('consumer', { container_id: 'amqpcap-rhea-consumer-512', id: 'con', max_frame_size: 512 });
    const r = await openReceiver(con, q, { name: 'rhea-512-receiver', credit_window: 10 });
    await receive(r, 4, () => ['accepted'], 8000);
    await sleep(300);
    await closeLink(r);
    await closeConn(con);
    await closeConn(pub);
};

// a refused login and links to things that do not exist
scenarios.errors = async function () {
    await connect('wrong-password', { container_id: 'amqpcap-rhea-badpw', id: 'badpw', password: 'wrong-pw-0000' });
    await sleep(300);
    // each failing link on a session of its own: RabbitMQ's 1.0 plugin (3.x) ends the session
    const c = await connect('missing-queue', { container_id: 'amqpcap-rhea-errors', id: 'err' });
    const session = () => { const x = c.create_session(); x.begin(); return x; };
    const ms = await openSender(session(), '/amq/queue/' + PREFIX + '-missing', { name: 'rhea-missing-sender' });
    send(ms, { message_id: 'rhea-to-missing', body: M.data_section(body('rhea-missing', 10)) }, 'to a missing queue');
    await sleep(500);
    await openReceiver(session(), '/amq/queue/' + PREFIX + '-missing', { name: 'rhea-missing-receiver' });
    await openSender(session(), '/exchange/' + PREFIX + '-missing-exchange/key', { name: 'rhea-missing-exchange-sender' });
    await openReceiver(session(), '/bogus/' + PREFIX, { name: 'rhea-bad-address-receiver' });
    await openSender(session(), null, { name: 'rhea-anonymous-sender', target: {} });
    await sleep(300);
    await closeConn(c);
    // a queue limited to 2 messages with overflow reject-publish (policy set by the recorder):
    // RabbitMQ's 1.0 plugin (3.x) fails on the broker's nack and closes the connection
    const pub = await connect('full-queue', { container_id: 'amqpcap-rhea-full', id: 'full' });
    // a queue limited to 2 messages with overflow reject-publish (policy set by the recorder)
    const fs_ = await openSender(pub, '/queue/' + PREFIX + '-full', { name: 'rhea-full-sender' });
    const fds = [];
    for (let i = 0; i < 4; i++) {
        fds.push(send(fs_, { message_id: 'rhea-full-' + i, body: M.data_section(body('rhea-fullq-' + i, 20)) }, 'queue max-length 2, reject-publish'));
        await sleep(100);
    }
    await settledAll(fds, 5000);
    await sleep(300);
    await closeConn(pub);
};

// one connection, two sessions with a sender and a receiver each, max-frame-size 512 and a
// 1 s idle-time-out: 8 kB messages on both sessions at once (their transfers interleave on the
// connection), empty frames while idle, a receiver at zero credit while messages wait, then
// credit granted, and a drain
scenarios.multiplex = async function () {
    const qa = '/queue/' + PREFIX + '-mux-a';
    const qb = '/queue/' + PREFIX + '-mux-b';
    const qc = '/queue/' + PREFIX + '-mux-credit';
    const c = await connect('multiplex', { container_id: 'amqpcap-rhea-multiplex', id: 'mux', max_frame_size: 512,
        idle_time_out: 1000 });
    const session = () => { const x = c.create_session(); x.begin(); return x; };
    const s1 = session();
    const s2 = session();
    const sa = await openSender(s1, qa, { name: 'rhea-mux-sender-a' });
    const sb = await openSender(s2, qb, { name: 'rhea-mux-sender-b' });
    const ds = [];
    for (let i = 0; i < 2; i++) {
        ds.push(send(sa, { message_id: 'mux-a-' + i, body: M.data_section(body('rhea-mux-a-' + i, 8192)) }, 'session 1, 8 kB'));
        ds.push(send(sb, { message_id: 'mux-b-' + i, body: M.data_section(body('rhea-mux-b-' + i, 8192)) }, 'session 2, 8 kB'));
    }
    await settledAll(ds, 8000);
    // each receive loop starts as soon as its link is attached: the messages follow at once
    const ra = await openReceiver(s1, qa, { name: 'rhea-mux-receiver-a', credit_window: 10 });
    const pa = receive(ra, 2, () => ['accepted'], 8000);
    const rb = await openReceiver(s2, qb, { name: 'rhea-mux-receiver-b', credit_window: 10 });
    const pb = receive(rb, 2, () => ['accepted'], 8000);
    await Promise.all([pa, pb]);
    // idle: the broker sends empty frames (the client asked for a 1 s idle-time-out)
    await sleep(3500);
    // credit: 4 messages wait while the receiver has none, then 2 credits, then a drain
    const sc = await openSender(s1, qc, { name: 'rhea-mux-credit-sender' });
    const cds = [];
    for (let i = 0; i < 4; i++) cds.push(send(sc, { message_id: 'credit-' + i, body: 'waiting ' + i }, 'waits for credit'));
    await settledAll(cds, 5000);
    const rc = await openReceiver(s1, qc, { name: 'rhea-mux-credit-receiver', credit_window: 0 });
    emit({ ev: 'note', conn: 'mux', text: 'receiver attached with no credit; 4 messages wait' });
    await sleep(1000);
    const got = receive(rc, 2, () => ['accepted'], 5000);
    rc.add_credit(2);
    emit({ ev: 'credit', conn: 'mux', link: rc.name, add: 2 });
    await got;
    const drained = new Promise((resolve) => { rc.once('receiver_drained', resolve); setTimeout(resolve, 3000); });
    const more = receive(rc, 2, () => ['accepted'], 3000);
    rc.add_credit(5);
    rc.drain_credit();
    emit({ ev: 'credit', conn: 'mux', link: rc.name, add: 5, drain: true });
    await more;
    await drained;
    emit({ ev: 'drained', conn: 'mux', link: rc.name, credit: rc.credit });
    await sleep(300);
    for (const l of [sa, sb, ra, rb, sc, rc]) await closeLink(l);
    await closeConn(c);
};

// request / reply: a server on a request queue answers each request on a link to its reply-to
// address (RabbitMQ's 1.0 plugin in 3.x has no anonymous terminus), with the request's
// message-id as correlation-id
scenarios.rpc = async function () {
    const reqq = '/queue/' + PREFIX + '-rpc-requests';
    const repq = '/queue/' + PREFIX + '-rpc-replies';
    const srv = await connect('rpc-server', { container_id: 'amqpcap-rhea-rpc-server', id: 'srv' });
    const sr = await openReceiver(srv, reqq, { name: 'rhea-rpc-server-receiver', credit_window: 10 });
    const cli = await connect('rpc-client', { container_id: 'amqpcap-rhea-rpc-client', id: 'cli' });
    const cs = await openSender(cli, reqq, { name: 'rhea-rpc-client-sender' });
    const cr = await openReceiver(cli, repq, { name: 'rhea-rpc-client-receiver', credit_window: 10 });
    const replySenders = {};
    const replyTo = (addr) => {
        if (!replySenders[addr]) replySenders[addr] = openSender(srv, addr, { name: 'rhea-rpc-server-reply-sender' });
        return replySenders[addr];
    };
    const served = receive(sr, 3, (msg) => {
        replyTo(msg.reply_to).then((ss) => send(ss, { correlation_id: msg.message_id, message_id: 'reply-' + msg.message_id,
            subject: 'reply', content_type: 'text/plain', body: 'reply to ' + msg.body }, 'reply'));
        return ['accepted'];
    }, 8000);
    const replies = receive(cr, 3, () => ['accepted'], 8000);
    for (let i = 0; i < 3; i++) {
        send(cs, { message_id: 'rpc-req-' + i, reply_to: repq, subject: 'request', content_type: 'text/plain',
            body: 'request ' + i }, 'request');
        await sleep(50);
    }
    await served;
    await replies;
    await sleep(300);
    await closeConn(cli);
    await closeConn(srv);
};

(async () => {
    const f = scenarios[args.scenario];
    if (!f) { console.error('unknown scenario ' + args.scenario); process.exit(2); }
    emit({ ev: 'start', client: 'rhea', client_version: require('rhea/package.json').version, node: process.version,
        scenario: args.scenario, src: SRC, server: HOST + ':' + PORT });
    try {
        await f();
        emit({ ev: 'end', ok: true });
    } catch (e) {
        emit({ ev: 'end', ok: false, error: String(e && e.stack || e) });
        fs.closeSync(out);
        process.exit(1);
    }
    fs.closeSync(out);
    process.exit(0);
})();
