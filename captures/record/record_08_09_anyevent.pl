#!/usr/bin/perl
# AnyEvent::RabbitMQ scenario for amqpcap captures.
#
#   perl record_08_09_anyevent.pl --src 127.0.9.2 --ops ops.json
#
# AnyEvent::RabbitMQ loads its own fixed_amqp0-9-1.xml (major=0 minor=9
# revision=1), so Net::AMQP::Protocol->header gives "AMQP" 01 01 00 09 (the 0-9
# header) while the methods it speaks are 0-9-1 (plus RabbitMQ's confirm
# class).  The TCP socket is bound to --src by wrapping
# AnyEvent::Socket::tcp_connect; every frame read/written by Net::AMQP is
# logged by wrapping Net::AMQP->parse_raw_frames / Net::AMQP::Frame::to_raw_frame.
use strict;
use warnings;
use Getopt::Long;
use Socket qw(pack_sockaddr_in inet_aton);
use Time::HiRes ();
use Digest::SHA qw(sha256_hex);
use JSON::PP;
use Scalar::Util qw(blessed);
use AnyEvent;
use AnyEvent::Socket ();
use AnyEvent::RabbitMQ;
use Net::AMQP;

my ($SRC, $OPS_FILE) = ('127.0.9.2', undef);
GetOptions('src=s' => \$SRC, 'ops=s' => \$OPS_FILE) or die;
die "--ops required\n" unless $OPS_FILE;

my $USER     = 'amqpcap08';
my $PASSWORD = 's3cret-pw';
my $VHOST    = '/';
my $EXCHANGE = 'amqpcap09ae.fanout';
my $QUEUE    = 'amqpcap09ae.q';
my $CTAG     = 'amqpcap09ae-ctag';

my (@OPS, @FRAMES, %CONN);
sub now { 0 + sprintf('%.6f', Time::HiRes::time()) }
sub op {
    my ($name, %kw) = @_;
    my $rec = { seq => scalar(@OPS) + 1, op => $name, t => now(), %kw };
    push @OPS, $rec;
    my %short = map { $_ => $kw{$_} } grep { !/propert/ } keys %kw;
    print STDERR sprintf("op %2d %s %s\n", $rec->{seq}, $name,
                         JSON::PP->new->canonical->allow_blessed->encode(\%short));
    $rec;
}
sub body_info { my $b = shift; (body_size => length($b), body_sha256 => sha256_hex($b)) }

# ---- plain-data view of a Net::AMQP table / property value
sub plain {
    my $v = shift;
    return undef unless defined $v;
    if (blessed $v) {
        return $v->[0] ? JSON::PP::true : JSON::PP::false if $v->isa('Net::AMQP::Value::Boolean');
        return 0 + $v->[0] if $v->isa('Net::AMQP::Value::Integer');
        return "$v->[0]" if $v->isa('Net::AMQP::Value');
        return "$v";
    }
    return { map { $_ => plain($v->{$_}) } keys %$v } if ref $v eq 'HASH';
    return [ map { plain($_) } @$v ] if ref $v eq 'ARRAY';
    return $v;
}

# ---- frame logging
sub log_frame {
    my ($dir, $frame) = @_;
    my %r = (dir => $dir, t => now(), type => 0 + $frame->type_id,
             channel => 0 + ($frame->channel // 0));
    if ($frame->isa('Net::AMQP::Frame::Method')) {
        my $m = $frame->method_frame;
        ($r{method}) = ref($m) =~ /^Net::AMQP::Protocol::(.+)$/;
        $r{class_id}  = 0 + $m->class_id;
        $r{method_id} = 0 + $m->method_id;
    } elsif ($frame->isa('Net::AMQP::Frame::Header')) {
        my $h = $frame->header_frame;
        $r{class_id}   = 0 + $h->class_id;
        $r{body_size}  = 0 + $frame->body_size;
        $r{properties} = { map { $_ => plain($h->{$_}) } grep { defined $h->{$_} } keys %$h };
    } elsif ($frame->isa('Net::AMQP::Frame::Body')) {
        $r{size}   = length $frame->payload;
        $r{sha256} = sha256_hex($frame->payload);
    }
    push @FRAMES, \%r;
}
{
    no warnings 'redefine';
    my $orig_parse = \&Net::AMQP::parse_raw_frames;
    *Net::AMQP::parse_raw_frames = sub {
        my $len = length ${ $_[1] };    # AnyEvent::RabbitMQ passes exactly one frame
        my @f = $orig_parse->(@_);
        log_frame('s2c', $_) for @f;
        $FRAMES[-1]{size} = $len - 8 if @f == 1;
        @f;
    };
    my $orig_raw = \&Net::AMQP::Frame::to_raw_frame;
    *Net::AMQP::Frame::to_raw_frame = sub {
        my $raw = $orig_raw->(@_);
        log_frame('c2s', $_[0]);
        $FRAMES[-1]{size} = length($raw) - 8;
        $raw;
    };
    # bind the client socket to $SRC
    my $orig_tcp = \&AnyEvent::Socket::tcp_connect;
    no warnings 'prototype';
    *AnyEvent::Socket::tcp_connect = sub ($$$;$) {
        my ($host, $port, $connect_cb, $prepare_cb) = @_;
        $orig_tcp->($host, $port, sub {
            my ($fh) = @_;
            if ($fh) {
                my ($lport, $laddr) = Socket::unpack_sockaddr_in(getsockname $fh);
                my ($rport, $raddr) = Socket::unpack_sockaddr_in(getpeername $fh);
                %CONN = (local => [Socket::inet_ntoa($laddr), 0 + $lport],
                         remote => [Socket::inet_ntoa($raddr), 0 + $rport]);
                op('tcp.connect', %CONN);
            }
            $connect_cb->(@_);
        }, sub {
            my ($fh) = @_;
            bind($fh, pack_sockaddr_in(0, inet_aton($SRC))) or die "bind $SRC: $!";
            $prepare_cb ? $prepare_cb->(@_) : 10;
        });
    };
}

# ---- run one async call synchronously
sub call {
    my ($obj, $meth, %args) = @_;
    my $cv = AnyEvent->condvar;
    $obj->$meth(%args,
        on_success => sub { $cv->send(1, @_) },
        on_failure => sub { $cv->send(0, @_) });
    my ($ok, @r) = $cv->recv;
    die "$meth failed: " . join(' ', map { ref($_) ? ref($_) : $_ } @r) unless $ok;
    return @r;
}

sub content_of {
    my $r = shift;    # {deliver|ok => frame, header => frame, body => frame}
    my $p = $r->{header};    # the Basic::ContentHeader object
    my %props = map { $_ => plain($p->{$_}) } grep { defined $p->{$_} } keys %$p;
    return ($r->{body}->payload, \%props);
}

my $err;
my $ar = AnyEvent::RabbitMQ->new->load_xml_spec();
my $HEADER = Net::AMQP::Protocol->header;
eval {
    op('protocol.header', direction => 'c2s', bytes_hex => unpack('H*', $HEADER));
    push @FRAMES, { dir => 'c2s', t => now(), protocol_header_hex => unpack('H*', $HEADER) };
    call($ar, 'connect', host => '127.0.0.1', port => 5672, user => $USER, pass => $PASSWORD,
         vhost => $VHOST, timeout => 5, tune => { heartbeat => 1, frame_max => 8192 },
         client_properties => { connection_name => 'amqpcap 0-9 AnyEvent::RabbitMQ' },
         on_close => sub { op('connection.closed_callback') },
         on_read_failure => sub { op('read_failure', error => "@_") });
    my $sp = $ar->server_properties;
    op('connection.open', user => $USER, password => $PASSWORD, mechanism => 'AMQPLAIN',
       vhost => $VHOST, tune_requested => { heartbeat => 1, frame_max => 8192 },
       negotiated => { frame_max => 0 + $ar->{_frame_max}, channel_max => 0 + $ar->{_channel_max},
                       heartbeat => 1 },
       server_product => plain($sp->{product}), server_version => plain($sp->{version}));

    my ($ch) = call($ar, 'open_channel');
    op('channel.open', channel => 0 + $ch->id);

    call($ch, 'qos', prefetch_count => 10);
    op('basic.qos', channel => 0 + $ch->id, prefetch_size => 0, prefetch_count => 10, global => 0);

    call($ch, 'declare_exchange', exchange => $EXCHANGE, type => 'fanout', durable => 0,
         auto_delete => 1);
    op('exchange.declare', channel => 0 + $ch->id, exchange => $EXCHANGE, type => 'fanout',
       passive => 0, durable => 0, auto_delete => 1, internal => 0);

    my ($qf) = call($ch, 'declare_queue', queue => $QUEUE, exclusive => 1, auto_delete => 0,
                    durable => 0);
    op('queue.declare', channel => 0 + $ch->id, queue => $QUEUE, passive => 0, durable => 0,
       exclusive => 1, auto_delete => 0,
       result => { queue => $qf->method_frame->queue,
                   message_count => 0 + $qf->method_frame->message_count,
                   consumer_count => 0 + $qf->method_frame->consumer_count });

    call($ch, 'bind_queue', queue => $QUEUE, exchange => $EXCHANGE, routing_key => 'ignored.by.fanout');
    op('queue.bind', channel => 0 + $ch->id, queue => $QUEUE, exchange => $EXCHANGE,
       routing_key => 'ignored.by.fanout');

    # publish with properties (AnyEvent::RabbitMQ fills defaults: content_type
    # application/octet-stream, delivery_mode 1, priority 1, timestamp now,
    # user_id = login user; numeric-looking header values are sent as strings)
    my $body1 = '{"hello":"amqpcap 0-9 via AnyEvent::RabbitMQ","n":1}';
    my %hdr1 = (content_type => 'application/json', content_encoding => 'utf-8',
                delivery_mode => 2, priority => 4, correlation_id => 'ae-corr-1',
                reply_to => 'amqpcap09ae.reply', message_id => 'ae-msg-1',
                timestamp => 1704164645, type => 'amqpcap.test', app_id => 'amqpcap-recorder',
                headers => { 'x-str' => 'text', 'x-num' => 42, 'x-nested' => { a => 'b' },
                             'x-bool' => Net::AMQP::Value::true });
    $ch->publish(exchange => $EXCHANGE, routing_key => 'rk.ae.1', body => $body1, header => \%hdr1);
    op('basic.publish', channel => 0 + $ch->id, exchange => $EXCHANGE, routing_key => 'rk.ae.1',
       mandatory => 0, immediate => 0, properties_given => plain(\%hdr1),
       properties => $FRAMES[-2]{properties}, body_frames => 1, body_info($body1));

    my ($g) = call($ch, 'get', queue => $QUEUE, no_ack => 0);
    my ($gb, $gp) = content_of($g);
    my $gm = $g->{ok}->method_frame;
    op('basic.get', channel => 0 + $ch->id, queue => $QUEUE, no_ack => 0, result => 'get-ok',
       delivery_tag => 0 + $gm->delivery_tag, redelivered => 0 + $gm->redelivered,
       exchange => $gm->exchange, routing_key => $gm->routing_key,
       message_count => 0 + $gm->message_count, received_properties => $gp, body_info($gb));
    $ch->ack(delivery_tag => $gm->delivery_tag);
    op('basic.ack', channel => 0 + $ch->id, delivery_tag => 0 + $gm->delivery_tag, multiple => 0);

    my ($ge) = call($ch, 'get', queue => $QUEUE, no_ack => 1);
    op('basic.get', channel => 0 + $ch->id, queue => $QUEUE, no_ack => 1,
       result => $ge->{empty} ? 'get-empty' : 'get-ok');

    # consume two messages, one spanning several body frames (frame_max 8192)
    my @got;
    my $cv_del = AnyEvent->condvar;
    $cv_del->begin for 1 .. 2;
    my ($cf) = call($ch, 'consume', queue => $QUEUE, consumer_tag => $CTAG, no_ack => 0,
                    on_consume => sub { push @got, $_[0]; $cv_del->end });
    op('basic.consume', channel => 0 + $ch->id, queue => $QUEUE, consumer_tag => $CTAG,
       no_local => 0, no_ack => 0, exclusive => 0,
       result_consumer_tag => $cf->method_frame->consumer_tag);
    my $body2 = 'second message';
    my $body3 = join('', map { chr(32 + ($_ * 7) % 95) } 0 .. 19999);    # 20000 bytes
    for ([$body2, 'rk.ae.2', 'ae-msg-2'], [$body3, 'rk.ae.3', 'ae-msg-3-big']) {
        my ($b, $rk, $mid) = @$_;
        $ch->publish(exchange => $EXCHANGE, routing_key => $rk, body => $b,
                     header => { message_id => $mid, content_type => 'text/plain' });
        my $nf = int((length($b) + 8183) / 8184);
        op('basic.publish', channel => 0 + $ch->id, exchange => $EXCHANGE, routing_key => $rk,
           mandatory => 0, immediate => 0, properties_given => { message_id => $mid,
           content_type => 'text/plain' }, properties => $FRAMES[-1 - $nf]{properties},
           body_frames => $nf, body_info($b));
    }
    $cv_del->recv;
    for my $d (@got) {
        my ($b, $p) = content_of($d);
        my $m = $d->{deliver}->method_frame;
        op('basic.deliver', channel => 0 + $ch->id, direction => 's2c',
           consumer_tag => $m->consumer_tag, delivery_tag => 0 + $m->delivery_tag,
           redelivered => 0 + $m->redelivered, exchange => $m->exchange,
           routing_key => $m->routing_key, received_properties => $p, body_info($b));
    }
    # ack both with one multiple=1 ack (AnyEvent::RabbitMQ sets multiple only for tag 0,
    # so pass it explicitly)
    my $last = $got[-1]{deliver}->method_frame->delivery_tag;
    $ch->ack(delivery_tag => $last, multiple => 1);
    op('basic.ack', channel => 0 + $ch->id, delivery_tag => 0 + $last, multiple => 1);

    call($ch, 'cancel', consumer_tag => $CTAG);
    op('basic.cancel', channel => 0 + $ch->id, consumer_tag => $CTAG, nowait => 0);

    # idle for a while so heartbeats (negotiated 1 s) show up in the capture
    my $idle = AnyEvent->condvar;
    my $t = AnyEvent->timer(after => 3.5, cb => sub { $idle->send });
    op('idle', seconds => 3.5, note => 'heartbeat frames expected both ways');
    $idle->recv;

    # publisher confirms (RabbitMQ extension, used although the header said 0-9)
    call($ch, 'confirm');
    op('confirm.select', channel => 0 + $ch->id, nowait => 0);
    my $cv_ack = AnyEvent->condvar;
    my $body4 = 'confirmed publish';
    $ch->publish(exchange => $EXCHANGE, routing_key => 'rk.ae.4', body => $body4,
                 header => { message_id => 'ae-msg-4-confirm' },
                 on_ack => sub { $cv_ack->send('ack', @_) },
                 on_nack => sub { $cv_ack->send('nack', @_) });
    op('basic.publish', channel => 0 + $ch->id, exchange => $EXCHANGE, routing_key => 'rk.ae.4',
       mandatory => 0, immediate => 0, properties_given => { message_id => 'ae-msg-4-confirm' },
       properties => $FRAMES[-2]{properties}, body_frames => 1, body_info($body4),
       confirm_publish_seq => 1);
    my ($what, $af) = $cv_ack->recv;
    op("basic.$what", channel => 0 + $ch->id, direction => 's2c',
       delivery_tag => 0 + $af->method_frame->delivery_tag,
       multiple => 0 + $af->method_frame->multiple);

    my ($pf) = call($ch, 'purge_queue', queue => $QUEUE);
    op('queue.purge', channel => 0 + $ch->id, queue => $QUEUE,
       result_message_count => 0 + $pf->method_frame->message_count);

    call($ch, 'close');
    op('channel.close', channel => 1, reply_code => 200, reply_text => '');
    call($ar, 'close');
    op('connection.close', reply_code => 200, reply_text => '');
    1;
} or do { $err = $@; print STDERR "ERROR: $err"; };

open my $out, '>', $OPS_FILE or die "$OPS_FILE: $!";
print $out JSON::PP->new->canonical->pretty->allow_blessed->encode({
    client => { name => 'AnyEvent::RabbitMQ', version => "$AnyEvent::RabbitMQ::VERSION",
                net_amqp => "$Net::AMQP::VERSION", perl => "$^V",
                spec_file => 'fixed_amqp0-9-1.xml (File::ShareDir dist AnyEvent-RabbitMQ)' },
    protocol_header_sent_hex => unpack('H*', $HEADER),
    user => $USER, password => $PASSWORD, vhost => $VHOST, mechanism => 'AMQPLAIN',
    connections => [ { index => 0, %CONN } ],
    operations => \@OPS, frames => \@FRAMES, error => $err,
});
close $out;
exit($err ? 1 : 0);
