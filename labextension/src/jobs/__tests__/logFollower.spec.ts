import { utf8ByteLength } from '../logBuffer';
import { FetchLogChunk, LogFollower } from '../logFollower';
import { IJobLogChunk } from '../../common/models';

/**
 * A job log on a fake server: `write` appends, `finish` makes the job final, and
 * every read is recorded as [offset, limit].
 */
class FakeLog {
  reads: [number, number][] = [];
  private bytes = '';
  private final = false;

  write(text: string): void {
    this.bytes += text;
  }

  finish(): void {
    this.final = true;
  }

  fetch: FetchLogChunk = async (offset, limit) => {
    this.reads.push([offset, limit]);
    // The fake log is ASCII, so characters are bytes.
    const size = this.bytes.length;
    const start = Math.min(offset, size);
    const data = this.bytes.slice(start, start + limit);
    const next = start + data.length;
    const chunk: IJobLogChunk = {
      job_id: 'job-1',
      offset: start,
      next_offset: next,
      size,
      data,
      complete: this.final && next >= size
    };
    return chunk;
  };
}

describe('LogFollower, following a job’s log while it runs', () => {
  it('appends what each poll reads, in order, from the last offset', async () => {
    // Given a running job that has logged one line
    const log = new FakeLog();
    log.write('[job] starting kernel\n');
    const follower = new LogFollower(log.fetch, { readLimit: 1000 });

    // When the panel polls, the job logs more, and the panel polls again
    expect(await follower.poll()).toBe(true);
    log.write('[cell 1] hello\n[cell 2] world\n');
    expect(await follower.poll()).toBe(true);

    // Then the text is the log in order, and each read went on from the last end
    expect(follower.buffer.text).toBe(
      '[job] starting kernel\n[cell 1] hello\n[cell 2] world\n'
    );
    expect(log.reads.map(([offset]) => offset)).toEqual([0, 22]);
    expect(follower.complete).toBe(false);
  });

  it('reads a burst in several pieces within one poll', async () => {
    const log = new FakeLog();
    log.write('0123456789\n'.repeat(3));
    const follower = new LogFollower(log.fetch, { readLimit: 11 });
    await follower.poll();
    expect(follower.buffer.text).toBe('0123456789\n'.repeat(3));
    expect(log.reads).toEqual([
      [0, 11],
      [11, 11],
      [22, 11]
    ]);
  });

  it('reports no change when nothing new was written', async () => {
    const log = new FakeLog();
    log.write('[job] queued\n');
    const follower = new LogFollower(log.fetch);
    await follower.poll();
    expect(await follower.poll()).toBe(false);
  });

  it('stops reading once the log is complete', async () => {
    // Given a job that finished after its last line
    const log = new FakeLog();
    log.write('[cell 3] done\n');
    log.finish();
    const follower = new LogFollower(log.fetch);

    // When the panel polls until the log is complete, and then polls again
    expect(await follower.poll()).toBe(true);
    expect(follower.complete).toBe(true);
    const reads = log.reads.length;
    expect(await follower.poll()).toBe(false);

    // Then the last poll asked the server for nothing, and the text stays readable
    expect(log.reads.length).toBe(reads);
    expect(follower.buffer.text).toBe('[cell 3] done\n');
  });

  it('becomes complete on the empty last chunk after the final line', async () => {
    const log = new FakeLog();
    log.write('[cell 1] a\n');
    const follower = new LogFollower(log.fetch);
    await follower.poll();
    log.finish();
    expect(await follower.poll()).toBe(true);
    expect(follower.complete).toBe(true);
  });

  it('does not read twice when polls overlap', async () => {
    const log = new FakeLog();
    log.write('[cell 1] a\n');
    const follower = new LogFollower(log.fetch);
    await Promise.all([follower.poll(), follower.poll()]);
    expect(log.reads.length).toBe(1);
    expect(follower.buffer.text).toBe('[cell 1] a\n');
  });

  it('reads the same offset again after a failed read', async () => {
    const log = new FakeLog();
    log.write('[cell 1] a\n');
    let fail = true;
    const follower = new LogFollower(async (offset, limit) => {
      if (fail) {
        fail = false;
        throw new Error('The service is not available right now.');
      }
      return log.fetch(offset, limit);
    });
    await expect(follower.poll()).rejects.toThrow('not available');
    await follower.poll();
    expect(follower.buffer.text).toBe('[cell 1] a\n');
  });

  it('shows only the end of a long log, keeping [cell N] prefixes whole', async () => {
    // Given a finished job with a log much longer than the window
    const log = new FakeLog();
    const lines = Array.from({ length: 100 }, (_, i) => `[cell ${i}] x\n`);
    log.write(lines.join(''));
    log.finish();
    const size = utf8ByteLength(lines.join(''));
    const follower = new LogFollower(log.fetch, {
      window: 60,
      knownSize: size
    });

    // When it is first read
    await follower.poll();

    // Then the page holds the last whole lines only, and earlier text can be loaded
    expect(follower.buffer.text.startsWith('[cell ')).toBe(true);
    expect(follower.buffer.text.endsWith('[cell 99] x\n')).toBe(true);
    expect(follower.buffer.text.length).toBeLessThanOrEqual(60);
    expect(follower.buffer.hasEarlier).toBe(true);
    expect(log.reads[0][0]).toBe(size - 60);

    // And "load earlier" puts the lines before it back, in order
    const before = follower.buffer.text;
    expect(await follower.loadEarlier()).toBe(true);
    expect(follower.buffer.text.endsWith(before)).toBe(true);
    expect(follower.buffer.text.length).toBeGreaterThan(before.length);
    const shown = follower.buffer.text.split('\n').filter(Boolean);
    const first = lines.length - shown.length;
    expect(shown).toEqual(
      lines.slice(first).map(line => line.replace(/\n$/, ''))
    );
  });

  it('has nothing earlier to load for a log read from its start', async () => {
    const log = new FakeLog();
    log.write('[cell 1] a\n');
    const follower = new LogFollower(log.fetch);
    await follower.poll();
    expect(await follower.loadEarlier()).toBe(false);
  });
});
