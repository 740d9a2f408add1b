function m = read_rows(file, width)
%READ_ROWS  A row-major float64 file (as numpy's tofile writes it) as a steps x width matrix.
fid = fopen(file, 'r');
v = fread(fid, Inf, 'double', 0, 'ieee-le');
fclose(fid);
m = reshape(v, width, []).';   % the file is the memory of m.' in column-major order
end
