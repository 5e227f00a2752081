// Check drives a stream-protocol broker with the official RabbitMQ Java
// stream client: streams, confirms, every offset specification, named
// producers (de-duplication), stored offsets, single active consumer,
// super streams, filtering and stream stats. It exits non-zero on the
// first failure. Usage: java -cp 'lib/*:.' Check rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f
import com.rabbitmq.stream.*;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

public class Check {
  static void check(boolean ok, String what) {
    if (!ok) {
      System.err.println("FAIL: " + what);
      System.exit(1);
    }
    System.out.println("ok: " + what);
  }

  static void publish(Environment env, String stream, String name, int n, String prefix) throws Exception {
    ProducerBuilder pb = env.producerBuilder().stream(stream);
    if (name != null) pb = pb.name(name);
    Producer p = pb.build();
    CountDownLatch confirmed = new CountDownLatch(n);
    AtomicInteger refused = new AtomicInteger();
    for (int i = 0; i < n; i++) {
      MessageBuilder mb = p.messageBuilder();
      if (name != null) mb = mb.publishingId(i + 1);
      p.send(mb.addData((prefix + i).getBytes(StandardCharsets.UTF_8)).build(), s -> {
        if (!s.isConfirmed()) refused.incrementAndGet();
        confirmed.countDown();
      });
    }
    check(confirmed.await(20, TimeUnit.SECONDS) && refused.get() == 0, "publish " + n + " to " + stream + " confirmed");
    p.close();
  }

  static List<String> consume(Environment env, String stream, OffsetSpecification spec, int n) throws Exception {
    List<String> got = Collections.synchronizedList(new ArrayList<>());
    CountDownLatch latch = new CountDownLatch(n);
    Consumer c = env.consumerBuilder().stream(stream).offset(spec).messageHandler((ctx, m) -> {
      got.add(new String(m.getBodyAsBinary(), StandardCharsets.UTF_8));
      latch.countDown();
    }).build();
    latch.await(20, TimeUnit.SECONDS);
    Thread.sleep(300); // the rest of the last chunk
    c.close();
    return new ArrayList<>(got);
  }

  public static void main(String[] args) throws Exception {
    String uri = args.length > 0 ? args[0] : "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f";
    Environment env = Environment.builder().uri(uri).build();
    String s = "java-check";
    env.streamCreator().stream(s).maxAge(Duration.ofHours(1)).create();

    publish(env, s, null, 1000, "m-");
    List<String> all = consume(env, s, OffsetSpecification.first(), 1000);
    check(all.size() == 1000 && all.get(0).equals("m-0") && all.get(999).equals("m-999"), "consume from first");
    List<String> fromOffset = consume(env, s, OffsetSpecification.offset(990), 10);
    check(fromOffset.size() >= 10 && fromOffset.get(0).equals("m-990"), "consume from offset 990: " + (fromOffset.isEmpty() ? "" : fromOffset.get(0)));
    List<String> last = consume(env, s, OffsetSpecification.last(), 1);
    check(!last.isEmpty() && last.get(last.size() - 1).equals("m-999"), "consume from last");

    StreamStats stats = env.queryStreamStats(s);
    check(stats.firstOffset() == 0 && stats.committedChunkId() >= 0, "stream stats: first " + stats.firstOffset() + " committed chunk " + stats.committedChunkId());

    // Named producer: republished ids are confirmed, not stored twice.
    String d = "java-dedup";
    env.streamCreator().stream(d).create();
    publish(env, d, "app", 100, "d-");
    publish(env, d, "app", 100, "d-");
    check(env.queryStreamStats(d).committedChunkId() < 100, "de-duplication keeps 100 messages");
    List<String> dd = consume(env, d, OffsetSpecification.first(), 200);
    check(dd.size() == 100, "de-duplicated stream holds " + dd.size() + " messages");

    // Stored offsets.
    Consumer tc = env.consumerBuilder().stream(s).name("tracker").offset(OffsetSpecification.first())
        .manualTrackingStrategy().builder().messageHandler((ctx, m) -> {
          if (ctx.offset() == 500) ctx.storeOffset();
        }).build();
    long deadline = System.currentTimeMillis() + 10000;
    long stored = -1;
    while (System.currentTimeMillis() < deadline) {
      try {
        stored = tc.storedOffset();
        if (stored == 500) break;
      } catch (Exception e) {
      }
      Thread.sleep(50);
    }
    tc.close();
    check(stored == 500, "stored offset " + stored);

    // Single active consumer.
    AtomicInteger a = new AtomicInteger(), b = new AtomicInteger();
    Consumer ca = env.consumerBuilder().stream(s).name("sac").singleActiveConsumer().offset(OffsetSpecification.first())
        .messageHandler((ctx, m) -> a.incrementAndGet()).build();
    Consumer cb = env.consumerBuilder().stream(s).name("sac").singleActiveConsumer().offset(OffsetSpecification.first())
        .messageHandler((ctx, m) -> b.incrementAndGet()).build();
    Thread.sleep(1000);
    check(a.get() == 1000 && b.get() == 0, "single active consumer: active " + a.get() + ", inactive " + b.get());
    ca.close(); // stores its offset (automatic tracking): the next one resumes after it
    Thread.sleep(500);
    publish(env, s, null, 10, "n-");
    deadline = System.currentTimeMillis() + 10000;
    while (b.get() < 10 && System.currentTimeMillis() < deadline) Thread.sleep(50);
    check(b.get() == 10, "second consumer promoted, resumes after the stored offset: got " + b.get());
    cb.close();

    // Super stream.
    String ss = "java-invoices";
    env.streamCreator().name(ss).superStream().partitions(3).creator().create();
    Producer sp = env.producerBuilder().superStream(ss).routing(m -> m.getProperties().getMessageIdAsString()).producerBuilder().build();
    CountDownLatch sc = new CountDownLatch(300);
    for (int i = 0; i < 300; i++) {
      sp.send(sp.messageBuilder().properties().messageId("k" + i).messageBuilder().addData(("i-" + i).getBytes()).build(), st -> sc.countDown());
    }
    check(sc.await(20, TimeUnit.SECONDS), "super stream publish confirmed");
    sp.close();
    AtomicInteger sg = new AtomicInteger();
    Consumer ssc = env.consumerBuilder().superStream(ss).offset(OffsetSpecification.first()).messageHandler((ctx, m) -> sg.incrementAndGet()).build();
    deadline = System.currentTimeMillis() + 10000;
    while (sg.get() < 300 && System.currentTimeMillis() < deadline) Thread.sleep(50);
    ssc.close();
    check(sg.get() == 300, "super stream consumer got " + sg.get());
    env.deleteSuperStream(ss);

    // Filtering.
    String f = "java-filter";
    env.streamCreator().stream(f).create();
    for (String region : new String[] {"eu", "us"}) {
      Producer fp = env.producerBuilder().stream(f).filterValue(m -> m.getApplicationProperties().get("region").toString()).build();
      CountDownLatch fl = new CountDownLatch(100);
      for (int i = 0; i < 100; i++) {
        fp.send(fp.messageBuilder().applicationProperties().entry("region", region).messageBuilder().addData((region + i).getBytes()).build(), st -> fl.countDown());
      }
      fl.await(20, TimeUnit.SECONDS);
      fp.close();
    }
    AtomicInteger eu = new AtomicInteger(), other = new AtomicInteger();
    Consumer fc = env.consumerBuilder().stream(f).offset(OffsetSpecification.first()).filter().values("eu")
        .postFilter(m -> "eu".equals(m.getApplicationProperties().get("region").toString())).builder()
        .messageHandler((ctx, m) -> { if (new String(m.getBodyAsBinary()).startsWith("eu")) eu.incrementAndGet(); else other.incrementAndGet(); }).build();
    deadline = System.currentTimeMillis() + 10000;
    while (eu.get() < 100 && System.currentTimeMillis() < deadline) Thread.sleep(50);
    fc.close();
    check(eu.get() == 100 && other.get() == 0, "filtering consumer: eu " + eu.get() + ", other " + other.get());

    env.deleteStream(s);
    env.deleteStream(d);
    env.deleteStream(f);
    boolean gone = false;
    try {
      env.queryStreamStats(s);
    } catch (StreamDoesNotExistException e) {
      gone = true;
    }
    check(gone, "deleted stream does not exist");
    env.close();
    System.out.println("all checks passed");
  }
}
