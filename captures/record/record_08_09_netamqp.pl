#!/usr/bin/perl
# AMQP 0-8 / 0-9 client scenario built on Net::AMQP (a codec only) over a
# plain IO::Socket::INET, for amqpcap captures.
#
#   perl record_08_09_netamqp.pl --spec 0-8 --src 127.0.8.2 --ops ops.json
#   perl record_08_09_netamqp.pl --spec 0-9 --src 127.0.9.1 --ops ops.json
#
# The protocol header comes from the loaded spec (Net::AMQP::Protocol->header):
# 0-8 XML (major=8 minor=0) gives "AMQP" 01 01 08 00, 0-9 XML gives 01 01 00 09.
# Two TCP connections are made from --src to 127.0.0.1:5672:
#   conn 0: the normal scenario (handshake, channel, access.request, declare,
#           bind, qos, publish x3 incl. a multi-frame body, get/ack, consume/
#           deliver/ack/cancel, delete, close);
#   conn 1: something the broker refuses (0-8: basic.publish immediate=1;
#           0-9: dtx.select), to capture the broker's connection.close.
# Everything sent and received (frame by frame) and every operation is written
# to --ops as JSON; record_08_09.py turns it into the .truth.json.
use strict;
use warnings;
use Getopt::Long;
use IO::Socket::INET;
use IO::Select;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes ();
use Digest::SHA qw(sha256_hex);
use JSON::PP;
use Scalar::Util qw(blessed);
use Net::AMQP;
use Net::AMQP::Common qw(:all);

my ($SPEC, $SRC, $OPS_FILE) = ('0-8', '127.0.8.2', undef);
GetOptions('spec=s' => \$SPEC, 'src=s' => \$SRC, 'ops=s' => \$OPS_FILE)
    or die "usage: $0 --spec 0-8|0-9 --src ADDR --ops FILE\n";
die "--ops required\n" unless $OPS_FILE;
die "--spec must be 0-8 or 0-9\n" unless $SPEC eq '0-8' || $SPEC eq '0-9';

my $USER     = 'amqpcap08';
my $PASSWORD = 's3cret-pw';
my $VHOST    = '/';
my $TAG      = $SPEC eq '0-8' ? 'amqpcap08n' : 'amqpcap09n';
my $EXCHANGE = "$TAG.topic";
my $QUEUE    = "$TAG.q";
my $CTAG     = "$TAG-ctag";
my $FRAME_MAX_ASKED = 4096;    # smallest RabbitMQ allows: gives multi-frame bodies

# ---------------------------------------------------------------- spec ----
my ($SPEC_FILE, $SPEC_PATCH);
{
    my $rel = $SPEC eq '0-8' ? '0-8/amqp0-8.stripped.xml' : '0-9/amqp0-9.stripped.xml';
    ($SPEC_FILE) = grep { -r } ("/usr/share/amqp/specs/$rel", "/work/shared/specs/$rel");
    die "no spec XML for $SPEC\n" unless $SPEC_FILE;
    open my $fh, '<', $SPEC_FILE or die "$SPEC_FILE: $!";
    local $/;
    my $xml = <$fh>;
    if ($SPEC eq '0-9') {
        # The 0-9 XML uses domain "content" (message.transfer body) without
        # defining it; Net::AMQP refuses to load it.  Define it as longstr.
        $xml =~ s{(<domain name="table" type="table"/>)}{$1\n  <domain name="content" type="longstr"/>}
            or die "cannot patch 0-9 spec";
        $SPEC_PATCH = 'added <domain name="content" type="longstr"/> (undefined in amqp0-9.stripped.xml; only used by message.transfer)';
    }
    Net::AMQP::Protocol->load_xml_spec(undef, \$xml);
}
my $HEADER = Net::AMQP::Protocol->header;

# Net::AMQP 0.06 can only unpack V S I D F A T t in tables.  Replace the table
# unpacker with a complete one (RabbitMQ dialect: b B s u I i l f d D S T F A t x V)
# that returns typed pairs [type, value] so the truth keeps the wire types.
{
    no warnings 'redefine';
    my %unpack;
    %unpack = (
        t => sub { unpack 'C', substr ${$_[0]}, 0, 1, '' },
        b => sub { unpack 'c', substr ${$_[0]}, 0, 1, '' },
        B => sub { unpack 'C', substr ${$_[0]}, 0, 1, '' },
        s => sub { unpack 's>', substr ${$_[0]}, 0, 2, '' },
        u => sub { unpack 'n', substr ${$_[0]}, 0, 2, '' },
        I => sub { unpack 'l>', substr ${$_[0]}, 0, 4, '' },
        i => sub { unpack 'N', substr ${$_[0]}, 0, 4, '' },
        l => sub { unpack 'q>', substr ${$_[0]}, 0, 8, '' },
        f => sub { unpack 'f>', substr ${$_[0]}, 0, 4, '' },
        d => sub { unpack 'd>', substr ${$_[0]}, 0, 8, '' },
        D => sub { my ($s, $v) = unpack 'Cl>', substr ${$_[0]}, 0, 5, ''; [$s, $v] },
        S => sub { unpack_long_string($_[0]) },
        x => sub { unpack 'H*', unpack_long_string($_[0]) },
        T => sub { unpack 'Q>', substr ${$_[0]}, 0, 8, '' },
        V => sub { undef },
        F => sub { Net::AMQP::Common::unpack_field_table($_[0]) },
        A => sub {
            my $len = unpack 'N', substr ${$_[0]}, 0, 4, '';
            my $in = substr ${$_[0]}, 0, $len, '';
            my @a;
            while (length $in) {
                my $t = substr $in, 0, 1, '';
                die "unknown array element type '$t'" unless $unpack{$t};
                push @a, [$t, $unpack{$t}->(\$in)];
            }
            \@a;
        },
    );
    *Net::AMQP::Common::unpack_field_table = sub {
        my $in_ref = shift;
        my $len = unpack 'N', substr $$in_ref, 0, 4, '';
        my $in = substr $$in_ref, 0, $len, '';
        my %t;
        while (length $in) {
            my $k = unpack_short_string(\$in);
            my $type = substr $in, 0, 1, '';
            die "unknown field type '$type' for '$k'" unless $unpack{$type};
            $t{$k} = [$type, $unpack{$type}->(\$in)];
        }
        \%t;
    };
}

# A table value with an explicit wire type (packs as type char + bytes).
package AmqpcapValue;
our @ISA = ('Net::AMQP::Value');
sub new { my ($c, $type, $bytes, $shown) = @_; bless [$shown, $type, $bytes], $c }
sub field_packed { $_[0][1] . $_[0][2] }
package main;

sub V_ { my ($type, $bytes, $shown) = @_; AmqpcapValue->new($type, $bytes, $shown) }

# ---------------------------------------------------------------- log ----
my (@OPS, @FRAMES, @CONNS);
my $JSON = JSON::PP->new->canonical->pretty;

sub op {
    my ($name, %kw) = @_;
    my $rec = { seq => scalar(@OPS) + 1, op => $name,
                t => 0 + sprintf('%.6f', Time::HiRes::time()), %kw };
    push @OPS, $rec;
    my %short = map { $_ => $kw{$_} } grep { !/properties|server_properties/ } keys %kw;
    print STDERR sprintf("op %2d %s %s\n", $rec->{seq}, $name,
                         JSON::PP->new->canonical->encode(\%short));
    return $rec;
}

sub method_name {
    my $m = shift;
    my ($n) = ref($m) =~ /^Net::AMQP::Protocol::(.+)$/;
    return $n;
}

sub log_frame {
    my ($conn, $dir, $frame, $raw_len) = @_;
    my %r = (dir => $dir, conn => $conn->{index},
             t => 0 + sprintf('%.6f', Time::HiRes::time()),
             type => 0 + $frame->type_id, channel => 0 + ($frame->channel // 0),
             size => $raw_len - 8);
    if ($frame->isa('Net::AMQP::Frame::Method')) {
        my $m = $frame->method_frame;
        $r{class_id}  = 0 + $m->class_id;
        $r{method_id} = 0 + $m->method_id;
        $r{method}    = method_name($m);
    } elsif ($frame->isa('Net::AMQP::Frame::Header')) {
        $r{class_id}  = 0 + ($frame->class_id // $frame->header_frame->class_id);
        $r{body_size} = 0 + $frame->body_size;
    } elsif ($frame->isa('Net::AMQP::Frame::Body')) {
        $r{sha256} = sha256_hex($frame->payload);
    }
    push @FRAMES, \%r;
}

# ------------------------------------------------------------ transport ----
sub connect_broker {
    my $index = scalar @CONNS;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => 5672, LocalAddr => $SRC,
        Proto => 'tcp', Timeout => 10,
    ) or die "connect: $!";
    setsockopt($sock, IPPROTO_TCP, TCP_NODELAY, 1);
    binmode $sock;
    my $c = { index => $index, sock => $sock, buf => '', frame_max => 131072,
              sel => IO::Select->new($sock), closed => 0 };
    push @CONNS, { index => $index, local => [$sock->sockhost, 0 + $sock->sockport],
                   remote => [$sock->peerhost, 0 + $sock->peerport] };
    op('tcp.connect', conn => $index, local => [$sock->sockhost, 0 + $sock->sockport],
       remote => [$sock->peerhost, 0 + $sock->peerport]);
    return $c;
}

sub send_raw {
    my ($c, $data) = @_;
    my $off = 0;
    while ($off < length $data) {
        my $n = syswrite $c->{sock}, $data, length($data) - $off, $off;
        die "write: $!" unless defined $n;
        $off += $n;
    }
}

# Send frames (method objects are wrapped) in one write, as a real client does.
sub send_frames {
    my ($c, $channel, @items) = @_;
    my $out = '';
    for my $it (@items) {
        my $frame = $it->isa('Net::AMQP::Protocol::Base') ? $it->frame_wrap : $it;
        $frame->channel($channel);
        my $raw = $frame->to_raw_frame;
        log_frame($c, 'c2s', $frame, length $raw);
        $out .= $raw;
    }
    send_raw($c, $out);
}

# Returns a frame, {protocol_header => bytes}, or undef on EOF/timeout.
sub recv_frame {
    my ($c, $timeout) = @_;
    $timeout //= 10;
    while (1) {
        if (length($c->{buf}) >= 8 && substr($c->{buf}, 0, 4) eq 'AMQP') {
            my $h = substr $c->{buf}, 0, 8, '';
            push @FRAMES, { dir => 's2c', conn => $c->{index},
                            t => 0 + sprintf('%.6f', Time::HiRes::time()),
                            protocol_header_hex => unpack('H*', $h) };
            return { protocol_header => $h };
        }
        if (length($c->{buf}) >= 7) {
            my ($type, $ch, $size) = unpack 'CnN', $c->{buf};
            if (length($c->{buf}) >= $size + 8) {
                my $rawlen = $size + 8;
                my $one = substr $c->{buf}, 0, $rawlen, '';    # exactly one frame
                my ($frame) = Net::AMQP->parse_raw_frames(\$one);
                log_frame($c, 's2c', $frame, $rawlen);
                return $frame;
            }
        }
        return undef unless $c->{sel}->can_read($timeout);
        my $n = sysread $c->{sock}, $c->{buf}, 65536, length $c->{buf};
        if (!$n) {
            push @FRAMES, { dir => 's2c', conn => $c->{index}, eof => JSON::PP::true,
                            t => 0 + sprintf('%.6f', Time::HiRes::time()),
                            leftover_hex => unpack('H*', $c->{buf}) };
            $c->{closed} = 1;
            return undef;
        }
    }
}

sub args_of {
    my $m = shift;
    my %a;
    for my $k (keys %$m) {
        my $v = $m->{$k};
        next if !defined $v;
        $a{$k} = $v;
    }
    return \%a;
}

# Wait for one of the expected methods on $channel.  Broker-initiated
# channel.close / connection.close are answered (close-ok) and returned.
sub expect {
    my ($c, $channel, @want) = @_;
    while (1) {
        my $f = recv_frame($c);
        die "connection $c->{index}: EOF/timeout while waiting for @want" unless $f;
        die "broker sent protocol header " . unpack('H*', $f->{protocol_header})
            if ref $f eq 'HASH';
        next unless $f->isa('Net::AMQP::Frame::Method');
        my $m = $f->method_frame;
        my $name = method_name($m);
        if ($name eq 'Connection::Close') {
            op('connection.close', conn => $c->{index}, direction => 's2c',
               reply_code => 0 + $m->reply_code, reply_text => '' . $m->reply_text,
               failing_class_id => 0 + ($m->{class_id} // 0),
               failing_method_id => 0 + ($m->{method_id} // 0));
            send_frames($c, 0, Net::AMQP::Protocol::Connection::CloseOk->new());
            op('connection.close-ok', conn => $c->{index}, direction => 'c2s');
            return $m;
        }
        if ($name eq 'Channel::Close' && !grep { $_ eq 'Channel::Close' } @want) {
            op('channel.close', conn => $c->{index}, channel => 0 + $f->channel,
               direction => 's2c', reply_code => 0 + $m->reply_code,
               reply_text => '' . $m->reply_text,
               failing_class_id => 0 + ($m->{class_id} // 0),
               failing_method_id => 0 + ($m->{method_id} // 0));
            send_frames($c, $f->channel, Net::AMQP::Protocol::Channel::CloseOk->new());
            op('channel.close-ok', conn => $c->{index}, channel => 0 + $f->channel,
               direction => 'c2s');
            return $m;
        }
        if (grep { $_ eq $name } @want) {
            die "method $name on channel " . $f->channel . ", expected $channel"
                if $f->channel != $channel;
            return $m;
        }
        die "unexpected $name on channel " . $f->channel . " (wanted @want)";
    }
}

sub recv_content {
    my ($c, $channel) = @_;
    my $h = recv_frame($c);
    die "expected content header" unless $h && $h->isa('Net::AMQP::Frame::Header');
    my $size = $h->body_size;
    my ($body, $nframes) = ('', 0);
    while (length($body) < $size) {
        my $b = recv_frame($c);
        die "expected body frame" unless $b && $b->isa('Net::AMQP::Frame::Body');
        $body .= $b->payload;
        $nframes++;
    }
    my $p = $h->header_frame;
    my %props = map { $_ => $p->{$_} } grep { defined $p->{$_} } keys %$p;
    return ($body, \%props, $nframes);
}

sub body_info { my $b = shift; (body_size => length($b), body_sha256 => sha256_hex($b)) }

sub props_shown {
    my $p = shift;
    my %o;
    for my $k (keys %$p) {
        next unless defined $p->{$k};
        if ($k eq 'headers') {
            my %h;
            for my $hk (keys %{ $p->{headers} }) {
                my $v = $p->{headers}{$hk};
                if (blessed($v) && $v->isa('AmqpcapValue')) { $h{$hk} = [$v->[1], $v->[0]] }
                elsif (blessed($v) && $v->isa('Net::AMQP::Value::String')) { $h{$hk} = ['S', $v->[0]] }
                elsif (blessed($v) && $v->isa('Net::AMQP::Value::Integer')) { $h{$hk} = ['I', $v->[0]] }
                elsif (ref $v eq 'HASH') { $h{$hk} = ['F', { map { $_ => ['S', $v->{$_}] } keys %$v }] }
                elsif ($v =~ /^-?\d+\z/) { $h{$hk} = ['I', 0 + $v] }
                else { $h{$hk} = ['S', $v] }
            }
            $o{headers} = \%h;
        } else {
            $o{$k} = $p->{$k} =~ /^\d+\z/ && $k =~ /mode|priority|timestamp/ ? 0 + $p->{$k} : $p->{$k};
        }
    }
    return \%o;
}

sub publish {
    my ($c, $channel, $ticket, $rk, $body, %props) = @_;
    my %extra = (mandatory => 0, immediate => 0);
    $extra{immediate} = delete $props{_immediate} if exists $props{_immediate};
    my $exchange = exists $props{_exchange} ? delete $props{_exchange} : $EXCHANGE;
    my $chunk = $c->{frame_max} - 8;
    my @bodies;
    for (my $i = 0; $i < length $body; $i += $chunk) {
        push @bodies, Net::AMQP::Frame::Body->new(payload => substr($body, $i, $chunk));
    }
    op('basic.publish', conn => $c->{index}, channel => $channel, ticket => $ticket,
       exchange => $exchange, routing_key => $rk, %extra,
       properties => props_shown(\%props), body_frames => scalar(@bodies), body_info($body));
    send_frames($c, $channel,
        Net::AMQP::Protocol::Basic::Publish->new(
            ticket => $ticket, exchange => $exchange, routing_key => $rk, %extra),
        Net::AMQP::Frame::Header->new(
            weight => 0, body_size => length($body),
            header_frame => Net::AMQP::Protocol::Basic::ContentHeader->new(%props)),
        @bodies);
}

# ------------------------------------------------------------- handshake ----
sub handshake {
    my ($c, $mechanism) = @_;
    op('protocol.header', conn => $c->{index}, direction => 'c2s',
       bytes_hex => unpack('H*', $HEADER));
    push @FRAMES, { dir => 'c2s', conn => $c->{index},
                    t => 0 + sprintf('%.6f', Time::HiRes::time()),
                    protocol_header_hex => unpack('H*', $HEADER) };
    send_raw($c, $HEADER);
    my $f = recv_frame($c);
    die "no answer to protocol header" unless $f;
    if (ref $f eq 'HASH') {
        op('protocol.header', conn => $c->{index}, direction => 's2c',
           bytes_hex => unpack('H*', $f->{protocol_header}), result => 'rejected');
        recv_frame($c, 2);
        return 0;
    }
    my $start = $f->method_frame;
    die "expected Connection::Start" unless method_name($start) eq 'Connection::Start';
    my $sp = $start->server_properties;
    op('connection.start', conn => $c->{index}, direction => 's2c',
       version_major => 0 + $start->version_major, version_minor => 0 + $start->version_minor,
       mechanisms => '' . $start->mechanisms, locales => '' . $start->locales,
       server_properties => $sp);

    my $response = $mechanism eq 'PLAIN'
        ? "\0$USER\0$PASSWORD"
        : { LOGIN => $USER, PASSWORD => $PASSWORD };    # AMQPLAIN: table without its own length
    send_frames($c, 0, Net::AMQP::Protocol::Connection::StartOk->new(
        client_properties => {
            product  => "amqpcap recorder (Net::AMQP $Net::AMQP::VERSION, spec $SPEC)",
            platform => "Perl $^V",
            version  => Net::AMQP::Value::String->new("$Net::AMQP::VERSION"),
            information => 'captures/record/record_08_09_netamqp.pl',
            connection_name => "amqpcap $SPEC Net::AMQP conn $c->{index}",
        },
        mechanism => $mechanism, response => $response, locale => 'en_US'));
    op('connection.start-ok', conn => $c->{index}, mechanism => $mechanism,
       user => $USER, password => $PASSWORD, locale => 'en_US',
       response_hex => $mechanism eq 'PLAIN' ? unpack('H*', $response) : undef);

    my $tune = expect($c, 0, 'Connection::Tune');
    return 0 if method_name($tune) eq 'Connection::Close';
    my $fm = $tune->frame_max && $tune->frame_max < $FRAME_MAX_ASKED ? $tune->frame_max : $FRAME_MAX_ASKED;
    $c->{frame_max} = $fm;
    op('connection.tune', conn => $c->{index}, direction => 's2c',
       channel_max => 0 + $tune->channel_max, frame_max => 0 + $tune->frame_max,
       heartbeat => 0 + $tune->heartbeat);
    send_frames($c, 0, Net::AMQP::Protocol::Connection::TuneOk->new(
        channel_max => $tune->channel_max, frame_max => $fm, heartbeat => 0));
    op('connection.tune-ok', conn => $c->{index}, channel_max => 0 + $tune->channel_max,
       frame_max => $fm, heartbeat => 0);

    send_frames($c, 0, Net::AMQP::Protocol::Connection::Open->new(
        virtual_host => $VHOST, capabilities => '', insist => 1));
    my $ok = expect($c, 0, 'Connection::OpenOk', 'Connection::Redirect');
    op('connection.open', conn => $c->{index}, vhost => $VHOST, capabilities => '',
       insist => JSON::PP::true, result => method_name($ok), result_args => args_of($ok));
    return method_name($ok) eq 'Connection::OpenOk';
}

sub open_channel {
    my ($c, $ch) = @_;
    send_frames($c, $ch, Net::AMQP::Protocol::Channel::Open->new(out_of_band => ''));
    my $ok = expect($c, $ch, 'Channel::OpenOk');
    op('channel.open', conn => $c->{index}, channel => $ch, out_of_band => '',
       result => method_name($ok), result_args => args_of($ok));
}

sub close_connection {
    my ($c) = @_;
    send_frames($c, 0, Net::AMQP::Protocol::Connection::Close->new(
        reply_code => 200, reply_text => 'Goodbye', class_id => 0, method_id => 0));
    my $ok = expect($c, 0, 'Connection::CloseOk');
    op('connection.close', conn => $c->{index}, reply_code => 200, reply_text => 'Goodbye',
       result => method_name($ok));
    close $c->{sock};
    op('tcp.close', conn => $c->{index});
}

# -------------------------------------------------------------- scenario ----
sub main_connection {
    my $c = connect_broker();
    handshake($c, $SPEC eq '0-8' ? 'AMQPLAIN' : 'PLAIN') or die "handshake failed";
    my $ch = 1;
    open_channel($c, $ch);

    # access.request (0-8/0-9 only; RabbitMQ answers with a dummy ticket)
    my $ticket = 0;
    send_frames($c, $ch, Net::AMQP::Protocol::Access::Request->new(
        realm => '/data', exclusive => 0, passive => 0, active => 1, write => 1, read => 1));
    my $r = expect($c, $ch, 'Access::RequestOk');
    if (method_name($r) eq 'Access::RequestOk') {
        $ticket = $r->ticket;
        op('access.request', conn => 0, channel => $ch, realm => '/data', exclusive => 0,
           passive => 0, active => 1, write => 1, read => 1, result => 'Access::RequestOk',
           ticket => 0 + $ticket);
    } else {
        op('access.request', conn => 0, channel => $ch, realm => '/data', result => 'channel closed');
        $ch = 2;
        open_channel($c, $ch);
    }

    send_frames($c, $ch, Net::AMQP::Protocol::Exchange::Declare->new(
        ticket => $ticket, exchange => $EXCHANGE, type => 'topic', passive => 0,
        durable => 0, auto_delete => 1, internal => 0, nowait => 0, arguments => {}));
    expect($c, $ch, 'Exchange::DeclareOk');
    op('exchange.declare', conn => 0, channel => $ch, ticket => 0 + $ticket,
       exchange => $EXCHANGE, type => 'topic', passive => 0, durable => 0,
       auto_delete => 1, internal => 0, nowait => 0, arguments => {});

    send_frames($c, $ch, Net::AMQP::Protocol::Queue::Declare->new(
        ticket => $ticket, queue => $QUEUE, passive => 0, durable => 0, exclusive => 1,
        auto_delete => 1, nowait => 0,
        arguments => { 'x-max-length' => Net::AMQP::Value::Integer->new(100) }));
    my $qok = expect($c, $ch, 'Queue::DeclareOk');
    op('queue.declare', conn => 0, channel => $ch, ticket => 0 + $ticket, queue => $QUEUE,
       passive => 0, durable => 0, exclusive => 1, auto_delete => 1, nowait => 0,
       arguments => { 'x-max-length' => ['I', 100] }, result_args => args_of($qok));

    send_frames($c, $ch, Net::AMQP::Protocol::Queue::Bind->new(
        ticket => $ticket, queue => $QUEUE, exchange => $EXCHANGE, routing_key => 'rk.#',
        nowait => 0, arguments => {}));
    expect($c, $ch, 'Queue::BindOk');
    op('queue.bind', conn => 0, channel => $ch, ticket => 0 + $ticket, queue => $QUEUE,
       exchange => $EXCHANGE, routing_key => 'rk.#', nowait => 0);

    send_frames($c, $ch, Net::AMQP::Protocol::Basic::Qos->new(
        prefetch_size => 0, prefetch_count => 5, global => 0));
    expect($c, $ch, 'Basic::QosOk');
    op('basic.qos', conn => 0, channel => $ch, prefetch_size => 0, prefetch_count => 5,
       global => 0);

    # headers: 0-8 sticks to the 0-8 spec's table types (S I D T F);
    # 0-9 adds the RabbitMQ/0-9-1 ones (t b s l d f x A V) on top.
    my %headers = (
        'x-str'    => Net::AMQP::Value::String->new('text value'),
        'x-int'    => Net::AMQP::Value::Integer->new(-123456),
        'x-dec'    => V_('D', pack('Cl>', 2, 314), [2, 314]),
        'x-ts'     => V_('T', pack('Q>', 1704164645), 1704164645),
        'x-table'  => V_('F', pack_field_table({ inner => Net::AMQP::Value::String->new('x') }),
                         { inner => ['S', 'x'] }),
    );
    if ($SPEC eq '0-9') {
        %headers = (%headers,
            'x-bool'  => V_('t', pack('C', 1), 1),
            'x-i8'    => V_('b', pack('c', -5), -5),
            'x-i16'   => V_('s', pack('s>', -300), -300),
            'x-i64'   => V_('l', pack('q>', 1234567890123), 1234567890123),
            'x-f64'   => V_('d', pack('d>', 2.5), 2.5),
            'x-f32'   => V_('f', pack('f>', 0.5), 0.5),
            'x-bytes' => V_('x', pack('N', 3) . "\x01\x02\x03", '010203'),
            'x-array' => V_('A', pack_field_array([Net::AMQP::Value::String->new('a'),
                                                   Net::AMQP::Value::Integer->new(7)]),
                            [['S', 'a'], ['I', 7]]),
            'x-void'  => V_('V', '', undef),
        );
    }
    my $body1 = qq({"hello":"amqpcap $SPEC via Net::AMQP","n":1});
    publish($c, $ch, $ticket, 'rk.perl.small', $body1,
        content_type => 'application/json', content_encoding => 'utf-8',
        headers => \%headers, delivery_mode => 2, priority => 3,
        correlation_id => "$TAG-corr-1", reply_to => "$TAG.reply",
        expiration => '60000', message_id => "$TAG-msg-1", timestamp => 1704164645,
        type => 'amqpcap.test', user_id => $USER, app_id => 'amqpcap-recorder');

    my $body2 = join '', map { sprintf "%05d:%s\n", $_, 'x' x 58 } 0 .. 155;    # 10 KB
    $body2 = substr($body2, 0, 10000);
    publish($c, $ch, $ticket, 'rk.perl.big', $body2,
        content_type => 'text/plain', delivery_mode => 1, message_id => "$TAG-msg-2");

    my @tags;
    for my $i (1 .. 2) {
        send_frames($c, $ch, Net::AMQP::Protocol::Basic::Get->new(
            ticket => $ticket, queue => $QUEUE, no_ack => 0));
        my $g = expect($c, $ch, 'Basic::GetOk', 'Basic::GetEmpty');
        my ($body, $props, $nf) = recv_content($c, $ch);
        push @tags, $g->delivery_tag;
        op('basic.get', conn => 0, channel => $ch, ticket => 0 + $ticket, queue => $QUEUE,
           no_ack => 0, result => method_name($g), delivery_tag => 0 + $g->delivery_tag,
           redelivered => 0 + $g->redelivered, exchange => $g->exchange,
           routing_key => $g->routing_key, message_count => 0 + $g->message_count,
           received_properties => $props, body_frames => $nf, body_info($body));
    }
    send_frames($c, $ch, Net::AMQP::Protocol::Basic::Ack->new(
        delivery_tag => $tags[-1], multiple => 1));
    op('basic.ack', conn => 0, channel => $ch, delivery_tag => 0 + $tags[-1], multiple => 1);

    send_frames($c, $ch, Net::AMQP::Protocol::Basic::Get->new(
        ticket => $ticket, queue => $QUEUE, no_ack => 0));
    my $ge = expect($c, $ch, 'Basic::GetOk', 'Basic::GetEmpty');
    op('basic.get', conn => 0, channel => $ch, ticket => 0 + $ticket, queue => $QUEUE,
       no_ack => 0, result => method_name($ge), result_args => args_of($ge));

    # consume
    my $body3 = "delivered to a consumer ($SPEC)";
    publish($c, $ch, $ticket, 'rk.perl.consume', $body3,
        content_type => 'text/plain', message_id => "$TAG-msg-3", reply_to => "$TAG.reply",
        correlation_id => "$TAG-corr-3");
    send_frames($c, $ch, Net::AMQP::Protocol::Basic::Consume->new(
        ticket => $ticket, queue => $QUEUE, consumer_tag => $CTAG, no_local => 0,
        no_ack => 0, exclusive => 0, nowait => 0,
        ($SPEC eq '0-9' ? (filter => {}) : ())));
    my $cok = expect($c, $ch, 'Basic::ConsumeOk');
    op('basic.consume', conn => 0, channel => $ch, ticket => 0 + $ticket, queue => $QUEUE,
       consumer_tag => $CTAG, no_local => 0, no_ack => 0, exclusive => 0, nowait => 0,
       result_consumer_tag => $cok->consumer_tag);
    my $d = expect($c, $ch, 'Basic::Deliver');
    my ($b3, $p3, $nf3) = recv_content($c, $ch);
    op('basic.deliver', conn => 0, channel => $ch, direction => 's2c',
       consumer_tag => $d->consumer_tag, delivery_tag => 0 + $d->delivery_tag,
       redelivered => 0 + $d->redelivered, exchange => $d->exchange,
       routing_key => $d->routing_key, received_properties => $p3, body_frames => $nf3,
       body_info($b3));
    send_frames($c, $ch, Net::AMQP::Protocol::Basic::Ack->new(
        delivery_tag => $d->delivery_tag, multiple => 0));
    op('basic.ack', conn => 0, channel => $ch, delivery_tag => 0 + $d->delivery_tag, multiple => 0);
    send_frames($c, $ch, Net::AMQP::Protocol::Basic::Cancel->new(
        consumer_tag => $CTAG, nowait => 0));
    expect($c, $ch, 'Basic::CancelOk');
    op('basic.cancel', conn => 0, channel => $ch, consumer_tag => $CTAG, nowait => 0);

    send_frames($c, $ch, Net::AMQP::Protocol::Queue::Delete->new(
        ticket => $ticket, queue => $QUEUE, if_unused => 0, if_empty => 0, nowait => 0));
    my $dok = expect($c, $ch, 'Queue::DeleteOk');
    op('queue.delete', conn => 0, channel => $ch, ticket => 0 + $ticket, queue => $QUEUE,
       if_unused => 0, if_empty => 0, result_args => args_of($dok));
    send_frames($c, $ch, Net::AMQP::Protocol::Exchange::Delete->new(
        ticket => $ticket, exchange => $EXCHANGE, if_unused => 0, nowait => 0));
    my $eok = expect($c, $ch, 'Exchange::DeleteOk');
    op('exchange.delete', conn => 0, channel => $ch, ticket => 0 + $ticket,
       exchange => $EXCHANGE, if_unused => 0, result => method_name($eok));

    send_frames($c, $ch, Net::AMQP::Protocol::Channel::Close->new(
        reply_code => 200, reply_text => 'bye', class_id => 0, method_id => 0));
    expect($c, $ch, 'Channel::CloseOk');
    op('channel.close', conn => 0, channel => $ch, reply_code => 200, reply_text => 'bye');
    close_connection($c);
}

# A second connection doing something RabbitMQ refuses.
sub refused_connection {
    my $c = connect_broker();
    handshake($c, 'AMQPLAIN') or return;
    open_channel($c, 1);
    if ($SPEC eq '0-8') {
        publish($c, 1, 0, 'rk.immediate', 'immediate delivery requested',
                content_type => 'text/plain', _immediate => 1, _exchange => 'amq.topic');
    } else {
        send_frames($c, 1, Net::AMQP::Protocol::Dtx::Select->new());
        op('dtx.select', conn => $c->{index}, channel => 1);
    }
    # whatever the broker does: channel.close, connection.close or a plain TCP close
    while (1) {
        my $f = recv_frame($c, 5);
        if (!$f) {
            op($c->{closed} ? 'tcp.closed_by_broker' : 'timeout', conn => $c->{index},
               note => 'no AMQP close method was received before the TCP connection ended');
            last;
        }
        next unless ref $f ne 'HASH' && $f->isa('Net::AMQP::Frame::Method');
        my $m = $f->method_frame;
        my $name = method_name($m);
        if ($name eq 'Connection::Close') {
            op('connection.close', conn => $c->{index}, direction => 's2c',
               reply_code => 0 + $m->reply_code, reply_text => '' . $m->reply_text,
               failing_class_id => 0 + ($m->{class_id} // 0),
               failing_method_id => 0 + ($m->{method_id} // 0));
            send_frames($c, 0, Net::AMQP::Protocol::Connection::CloseOk->new());
            op('connection.close-ok', conn => $c->{index}, direction => 'c2s');
            my $eof = recv_frame($c, 3);
            op('tcp.closed_by_broker', conn => $c->{index}) if !$eof && $c->{closed};
            last;
        }
        if ($name eq 'Channel::Close') {
            op('channel.close', conn => $c->{index}, channel => 0 + $f->channel,
               direction => 's2c', reply_code => 0 + $m->reply_code,
               reply_text => '' . $m->reply_text,
               failing_class_id => 0 + ($m->{class_id} // 0),
               failing_method_id => 0 + ($m->{method_id} // 0));
            send_frames($c, $f->channel, Net::AMQP::Protocol::Channel::CloseOk->new());
            op('channel.close-ok', conn => $c->{index}, channel => 0 + $f->channel,
               direction => 'c2s');
            close_connection($c);
            return;
        }
    }
    close $c->{sock};
    op('tcp.close', conn => $c->{index});
}

my $err;
eval {
    main_connection();
    refused_connection();
    1;
} or do { $err = $@; print STDERR "ERROR: $err"; };

open my $out, '>', $OPS_FILE or die "$OPS_FILE: $!";
print $out $JSON->encode({
    client => { name => 'Net::AMQP', version => "$Net::AMQP::VERSION", perl => "$^V",
                spec => $SPEC, spec_file => $SPEC_FILE, spec_patch => $SPEC_PATCH,
                transport => 'IO::Socket::INET (hand-written client loop)' },
    protocol_header_sent_hex => unpack('H*', $HEADER),
    user => $USER, password => $PASSWORD, vhost => $VHOST,
    mechanism => { 0 => ($SPEC eq '0-8' ? 'AMQPLAIN' : 'PLAIN'), 1 => 'AMQPLAIN' },
    connections => \@CONNS,
    operations => \@OPS, frames => \@FRAMES, error => $err,
});
close $out;
exit($err ? 1 : 0);
