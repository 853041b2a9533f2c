import { LogBuffer, utf8ByteLength } from '../logBuffer';
import { nodesOf, RankFilter, rankOf, ranksToOffer } from '../logRanks';
import { ERROR_LINE } from '../logSearch';
import { IDescribeJob } from '../../common/models';

/** A buffer that has read `text` from `start` on, in one piece. */
function bufferOf(
  text: string,
  start = 0,
  limit = 64 * 1024 * 1024
): LogBuffer {
  const buffer = new LogBuffer(limit, start);
  append(buffer, text);
  return buffer;
}

function append(buffer: LogBuffer, data: string): void {
  buffer.append({
    offset: buffer.end,
    next_offset: buffer.end + utf8ByteLength(data),
    data
  });
}

/** Two ranks' lines interleaved, as a 2-node job writes them. */
const TWO_RANKS = [
  '[job] starting 2 nodes',
  '[rank 0] [cell 1] init 0',
  '[rank 1] [cell 1] init 1',
  '[rank 1] [cell 2] loss 0.5',
  '[rank 0] [cell 2] loss 0.4',
  '[rank 0] [cell 3] all-reduce 1'
]
  .map(line => line + '\n')
  .join('');

describe('rankOf', () => {
  it('reads the rank prefix the multi-node runner writes, only at the start', () => {
    expect(rankOf('[rank 0] [cell 1] hello')).toBe(0);
    expect(rankOf('[rank 12] x')).toBe(12);
    expect(rankOf('[cell 1] said [rank 1] in passing')).toBeNull();
    expect(rankOf('[rank x] not a rank')).toBeNull();
    expect(rankOf('[job] starting')).toBeNull();
  });
});

describe('ranksToOffer', () => {
  it('offers every node of a multi-node job, even before its lines come', () => {
    expect(ranksToOffer(3, [])).toEqual([0, 1, 2]);
  });

  it('offers the ranks a log has when the job says nothing of nodes', () => {
    expect(ranksToOffer(undefined, [1, 0])).toEqual([0, 1]);
    expect(ranksToOffer(2, [3])).toEqual([0, 1, 3]);
  });

  it('offers nothing for a one-node job whose log has no ranks', () => {
    expect(ranksToOffer(1, [])).toEqual([]);
    expect(ranksToOffer(null, [])).toEqual([]);
  });
});

describe('nodesOf', () => {
  it('is the job’s nodes, or one for a description without them', () => {
    const job = { job_id: 'j' } as IDescribeJob;
    expect(nodesOf(job)).toBe(1);
    expect(nodesOf({ ...job, nodes: 2 })).toBe(2);
  });
});

describe('RankFilter', () => {
  it('keeps one rank’s lines, in order, and sees every rank', () => {
    const buffer = bufferOf(TWO_RANKS);
    const rank1 = new RankFilter(1);
    rank1.update(buffer);
    expect(rank1.lines).toEqual([2, 3]);
    expect([...rank1.seen].sort()).toEqual([0, 1]);

    const rank0 = new RankFilter(0);
    rank0.update(buffer);
    expect(rank0.lines.map(i => buffer.line(i))).toEqual([
      '[rank 0] [cell 1] init 0',
      '[rank 0] [cell 2] loss 0.4',
      '[rank 0] [cell 3] all-reduce 1'
    ]);
  });

  it('without a rank keeps no lines of its own but still sees the ranks', () => {
    const all = new RankFilter(null);
    all.update(bufferOf(TWO_RANKS));
    expect(all.lines).toEqual([]);
    expect([...all.seen].sort()).toEqual([0, 1]);
  });

  it('follows a running log: new lines of the rank join, a line written in pieces once', () => {
    // Given a filter on rank 1 over a log being written
    const buffer = bufferOf(TWO_RANKS);
    const filter = new RankFilter(1);
    filter.update(buffer);

    // When rank 1 writes a line in two pieces, with rank 0's line in between
    append(buffer, '[rank 1] [cell 3] all-re');
    filter.update(buffer);
    append(buffer, 'duce 1\n[rank 0] [job] done\n');
    filter.update(buffer);

    // Then the rank's lines are its three, the one written in pieces once
    expect(filter.lines.map(i => buffer.line(i))).toEqual([
      '[rank 1] [cell 1] init 1',
      '[rank 1] [cell 2] loss 0.5',
      '[rank 1] [cell 3] all-reduce 1'
    ]);
  });

  it('a line being written that turns out to be another rank’s is not kept', () => {
    const buffer = bufferOf('[rank 0] a\n');
    const filter = new RankFilter(1);
    append(buffer, '[rank');
    filter.update(buffer);
    append(buffer, ' 0] b\n[rank 1] c\n');
    filter.update(buffer);
    expect(filter.lines.map(i => buffer.line(i))).toEqual(['[rank 1] c']);
  });

  it('says how many of the rank’s lines came in front when earlier lines are read', () => {
    // Given the end of a log (from byte `start`), filtered on rank 1
    // (a window that starts mid-log drops its first line as partial)
    const earlier = '[rank 1] e1\n[rank 0] e0\n[rank 1] e2\n';
    const buffer = bufferOf(TWO_RANKS, utf8ByteLength(earlier));
    const filter = new RankFilter(1);
    filter.update(buffer);
    expect(filter.lines.length).toBe(2);

    // When the earlier part is put in front
    const taken = buffer.prepend({
      offset: 0,
      next_offset: buffer.start,
      data: earlier + '[job] starting 2 nodes\n'
    });
    expect(taken).toBe(true);
    const inFront = filter.update(buffer);

    // Then two of rank 1's lines came in front, and the rank has four
    expect(inFront).toBe(2);
    expect(filter.lines.map(i => buffer.line(i))).toEqual([
      '[rank 1] e1',
      '[rank 1] e2',
      '[rank 1] [cell 1] init 1',
      '[rank 1] [cell 2] loss 0.5'
    ]);
  });

  it('says how many of the rank’s lines went when old lines are dropped', () => {
    // Given a window of about 60 characters, and rank 0's lines filtered
    const buffer = new LogBuffer(60);
    const filter = new RankFilter(0);
    append(buffer, '[rank 0] one\n[rank 1] two\n[rank 0] three\n');
    filter.update(buffer);
    expect(filter.lines.length).toBe(2);

    // When more lines push the oldest out of the window
    append(buffer, '[rank 1] four\n[rank 1] five\n');
    const inFront = filter.update(buffer);

    // Then the dropped lines of rank 0 are counted off, and the rest kept
    const kept = filter.lines.map(i => buffer.line(i));
    expect(kept).toEqual(
      ['[rank 0] one', '[rank 0] three'].filter(line =>
        buffer.text.includes(line + '\n')
      )
    );
    expect(inFront).toBe(kept.length - 2);
  });
});

describe('ERROR_LINE in a multi-node log', () => {
  it('finds a rank’s exception and failure lines after its prefix', () => {
    expect(
      ERROR_LINE.test('[rank 1] [cell 3] RuntimeError: NCCL timeout')
    ).toBe(true);
    expect(ERROR_LINE.test('[rank 0] [job] failed: rank 1 failed')).toBe(true);
    expect(ERROR_LINE.test('[rank 0] [cell 1] loss 0.4')).toBe(false);
  });
});
