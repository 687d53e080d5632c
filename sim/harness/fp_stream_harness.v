// Plain-Verilog bulk harness for the fp stream tops (fp32_add, bf16_mul): no cocotb, no Python
// on the per-cycle path. Compile with
//   -DDUT=<module> -DWA=<a width> -DWB=<b width> -DNVEC=<vector count>
// and run with +vectors=<file> [+gap=<percent>] [+stall=<percent>] [+seed=<n>].
// Each line of the vector file is one hex word {a, b, expected y} (y in the low 32 bits).
// The harness offers operand pairs on i with random valid gaps (valid then stays high until the
// transfer), takes results from o with random back-pressure, compares every result in order
// with the expected word, and checks that nothing extra comes out. Output, one line:
//   RESULT n=<n> errors=<e> extra=<x> cycles=<c> first_in=<cycle> first_out=<cycle>
// preceded by up to 10 "MISMATCH" lines.
`timescale 1ns/1ps
module fp_stream_harness;
  localparam WA = `WA;
  localparam WB = `WB;
  localparam W = WA + WB + 32;
  localparam N = `NVEC;

  reg clk = 1'b0;
  reg rst = 1'b1;
  reg [W-1:0] vec [0:N-1];

  reg i_valid = 1'b0;
  reg [WA+WB-1:0] i_payload = 0;
  wire i_ready;
  wire o_valid;
  reg o_ready = 1'b0;
  wire [31:0] o_payload;

  `DUT dut (
    .clk(clk), .rst(rst),
    .i__valid(i_valid), .i__ready(i_ready), .i__payload(i_payload),
    .o__valid(o_valid), .o__ready(o_ready), .o__payload(o_payload)
  );

  integer gap, stall, seed, roll_gap, roll_stall;
  integer sent = 0, recv = 0, errors = 0, extra = 0, cycle = 0, tail = 0;
  integer first_in = -1, first_out = -1;
  reg [1023:0] path;
  reg [WA-1:0] a;
  reg [WB-1:0] b;
  reg [31:0] want;

  always #5 clk = ~clk;

  initial begin
    if (!$value$plusargs("vectors=%s", path)) begin
      $display("ERROR: +vectors=<file> is required");
      $finish;
    end
    if (!$value$plusargs("gap=%d", gap)) gap = 0;
    if (!$value$plusargs("stall=%d", stall)) stall = 0;
    if (!$value$plusargs("seed=%d", seed)) seed = 1;
    $readmemh(path, vec);
    repeat (2) @(posedge clk);
    rst <= 1'b0;
  end

  // Every decision is taken at a rising edge with non-blocking assignments, so the DUT samples
  // the values of the cycle that just ended.
  always @(posedge clk) if (!rst) begin
    // input side: count the transfer of this edge, then decide the next offer
    if (i_valid && i_ready) begin
      if (first_in < 0) first_in = cycle;
      sent = sent + 1;
    end
    roll_gap = $unsigned($random(seed)) % 100;
    roll_stall = $unsigned($random(seed)) % 100;
    if (!(i_valid && !i_ready)) begin
      if (sent < N && roll_gap >= gap) begin
        i_valid <= 1'b1;
        i_payload <= {vec[sent][32 +: WB], vec[sent][32 + WB +: WA]};
      end else begin
        i_valid <= 1'b0;
      end
    end
    // output side
    if (o_valid && o_ready) begin
      if (first_out < 0) first_out = cycle;
      if (recv >= N) begin
        extra = extra + 1;
      end else begin
        want = vec[recv][31:0];
        if (o_payload !== want) begin
          errors = errors + 1;
          if (errors <= 10) begin
            a = vec[recv][32 + WB +: WA];
            b = vec[recv][32 +: WB];
            $display("MISMATCH %0d: a=%h b=%h got=%h want=%h", recv, a, b, o_payload, want);
          end
        end
        recv = recv + 1;
      end
    end
    o_ready <= roll_stall >= stall;
    cycle = cycle + 1;
    if (recv >= N) tail = tail + 1;
    if (tail == 16 || cycle > 64 + N * 200) begin
      $display("RESULT n=%0d errors=%0d extra=%0d cycles=%0d first_in=%0d first_out=%0d sent=%0d",
               recv, errors, extra, cycle, first_in, first_out, sent);
      $finish;
    end
  end
endmodule
